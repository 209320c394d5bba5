import OutpostModels
import OutpostSchema
import Testing

/// Runs a suite or test on the field-service schema: installs it for the test process first. A
/// process runs on one app's schema, and the toolkit guesses none, so every suite of the field-service
/// tests carries this trait (`@Suite(.fieldService)`); installing it again is free.
public struct FieldServiceSchemaTrait: SuiteTrait, TestTrait, TestScoping {
    /// Applies to the suite's tests too, so a test run alone (`--filter`) installs it as well.
    public var isRecursive: Bool { true }

    /// Installs the field-service schema, then runs the test.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try EntityCatalog.install(EntityCatalog.fieldService)
        try await function()
    }
}

extension Trait where Self == FieldServiceSchemaTrait {
    /// The field-service schema, installed before the suite runs.
    public static var fieldService: Self { FieldServiceSchemaTrait() }
}
