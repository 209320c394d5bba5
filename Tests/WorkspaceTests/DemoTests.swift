import Foundation
import OutpostFieldServiceTesting
import Testing

/// `make demo` is the first thing a newcomer runs: it must pass, and fail loudly when a claim breaks.
@Suite(.fieldService) struct DemoTests {
    @Test func theFieldDayDemoPassesEveryCheck() async throws {
        let binary = Outpost.executable.deletingLastPathComponent().appendingPathComponent("outpost-demo")
        let process = Process()
        process.executableURL = binary
        let (status, output, errors) = try await ChildProcess.finish(process)
        let text = String(decoding: output, as: UTF8.self) + String(decoding: errors, as: UTF8.self)
        #expect(status == 0, "the demo failed:\n\(text)")
        #expect(text.contains("Demo passed"))
        #expect(text.contains("1 conflict surfaced"))
        #expect(text.contains("notes from Alice") && text.contains("weather from the office"))
        #expect(!text.contains("→ none"), "every temporary id was replaced")
    }
}
