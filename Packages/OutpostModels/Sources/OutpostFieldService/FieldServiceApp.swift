import OutpostMigrator
import OutpostModels
import OutpostSchema
import OutpostStore

extension LocalApp {
    /// The field-service app: its schema (`EntityCatalog.fieldService`), and its history v1…v14
    /// (`LocalSchema.steps`), which made the toolkit's tables too before the toolkit had its own steps
    /// (they adopt them: see `ToolkitSchema`).
    public static var fieldService: LocalApp { LocalApp(schema: EntityCatalog.fieldService, steps: LocalSchema.steps) }
}

// The field-service app's store, opened without naming the app: what its tools and tests write.
extension LocalStore {
    /// Opens the field-service app's store at `path` (`LocalApp.fieldService`); see
    /// `open(at:app:synchronous:busyTimeout:keepingFree:)`.
    public static func open(
        at path: String, synchronous: SynchronousMode = .normal, busyTimeout: Duration = .seconds(LocalDatabase.busyTimeout),
        keepingFree: Int64 = LocalStore.defaultFreeBytesKept
    ) throws(StoreError) -> LocalStore {
        try open(at: path, app: .fieldService, synchronous: synchronous, busyTimeout: busyTimeout, keepingFree: keepingFree)
    }

    /// The asset whose QR tag reads `code`, if the device has it: what a scan looks up.
    public func asset(withQRCode code: String) throws(StoreError) -> Asset? {
        try fetchAll(Asset.self, where: "qrCode", equals: .text(code)).first
    }
}

extension LocalDatabase {
    /// Migrates the field-service app's database at `path`; see `migrate(at:app:to:)`.
    @discardableResult
    public static func migrate(at path: String, to version: Int? = nil) throws(StoreError) -> Migrator.Outcome {
        try migrate(at: path, app: .fieldService, to: version)
    }

    /// Describes the field-service app's database at `path`; see `inspect(at:app:)`.
    public static func inspect(at path: String) throws(StoreError) -> DatabaseSummary {
        try inspect(at: path, app: .fieldService)
    }
}
