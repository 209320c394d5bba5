import OutpostBundles
import OutpostConflicts
import OutpostMigrator
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire

// The types an app names beside `Device`, so that `import Outpost` is all it writes. Each is defined and
// documented in the package that owns it; an alias, not a re-export of the whole package, keeps this
// surface deliberate. A tool that needs more (a custom transport's wire types, the engine itself)
// imports that package.

// MARK: - Records

/// A record type the store can hold: every model of an app's schema conforms. (`OutpostSchema.Syncable`)
public typealias Syncable = OutpostSchema.Syncable
/// The kinds of records, one per model. (`OutpostSchema.EntityType`)
public typealias EntityType = OutpostSchema.EntityType
/// A field's value, as `Device.records(_:where:is:)` and `list(_:where:is:)` compare it. (`OutpostSchema.FieldValue`)
public typealias FieldValue = OutpostSchema.FieldValue
/// A record's sync bookkeeping: server id, version, times, status, orphan flag. (`OutpostSchema.SyncMetadata`)
public typealias SyncMetadata = OutpostSchema.SyncMetadata
/// Whether a record's latest change reached the server. (`OutpostSchema.SyncStatus`)
public typealias SyncStatus = OutpostSchema.SyncStatus
/// Why a record breaks one of the catalog's rules. (`OutpostSchema.ModelError`)
public typealias ModelError = OutpostSchema.ModelError

// MARK: - Local store

/// An app's schema: its entities, scope and membership, checked whole when made. (`OutpostSchema.AppSchema`)
public typealias AppSchema = OutpostSchema.AppSchema
/// One entity of an app's schema: table, fields, parents, sync class, policy, access. (`OutpostSchema.EntityDescription`)
public typealias EntityDescription = OutpostSchema.EntityDescription
/// One field of an entity: name, kind, optionality. (`OutpostSchema.FieldDescription`)
public typealias FieldDescription = OutpostSchema.FieldDescription
/// What a field holds. (`OutpostSchema.FieldKind`)
public typealias FieldKind = OutpostSchema.FieldKind
/// A reference from one entity to another. (`OutpostSchema.ParentRelation`)
public typealias ParentRelation = OutpostSchema.ParentRelation
/// Who may write an entity's records. (`OutpostSchema.EntityAccess`)
public typealias EntityAccess = OutpostSchema.EntityAccess
/// A model's fields as key paths, in the schema's order. (`OutpostSchema.FieldTable`)
public typealias FieldTable = OutpostSchema.FieldTable
/// An app's local database: its schema and its migration steps. (`OutpostStore.LocalApp`)
public typealias LocalApp = OutpostStore.LocalApp
/// One step of an app's local history. (`OutpostMigrator.MigrationStep`)
public typealias MigrationStep = OutpostMigrator.MigrationStep

/// The device's database (`Device.store`): reads, writes, queue, conflicts, import. (`OutpostStore.LocalStore`)
public typealias LocalStore = OutpostStore.LocalStore
/// A long list of records, read a window at a time. (`OutpostStore.RecordList`)
public typealias RecordList = OutpostStore.RecordList
/// One committed change, as `LocalStore.changes()` reports it. (`OutpostStore.StoreChange`)
public typealias StoreChange = OutpostStore.StoreChange
/// Create, update or delete: what a change did. (`OutpostStore.MutationOperation`)
public typealias MutationOperation = OutpostStore.MutationOperation
/// The store's queue, conflicts and media state in one read. (`OutpostStore.StoreStatus`)
public typealias StoreStatus = OutpostStore.StoreStatus
/// A pulled record this app version could not take in, and why. (`OutpostStore.QuarantinedRecord`)
public typealias QuarantinedRecord = OutpostStore.QuarantinedRecord
/// Why the store refused or failed; nothing was written. (`OutpostStore.StoreError`)
public typealias StoreError = OutpostStore.StoreError
/// A value, delete or restore that lost, waiting for the user to keep or override it. (`OutpostStore.OpenConflict`)
public typealias OpenConflict = OutpostStore.OpenConflict
/// What the user decided about an open conflict. (`OutpostStore.ConflictChoice`)
public typealias ConflictChoice = OutpostStore.ConflictChoice

// MARK: - Pre-sync

/// What a bundle import did, in total and per entity. (`OutpostStore.ImportSummary`)
public typealias ImportSummary = OutpostStore.ImportSummary
/// The counts of one import, or of one entity in it. (`OutpostStore.ImportCounts`)
public typealias ImportCounts = OutpostStore.ImportCounts
/// How far an import has got. (`OutpostStore.ImportProgress`)
public typealias ImportProgress = OutpostStore.ImportProgress
/// The two encodings of a pre-sync bundle. (`OutpostWire.BundleFormat`)
public typealias BundleFormat = OutpostWire.BundleFormat
/// Why a bundle could not be read or imported, and where. (`OutpostBundles.BundleError`)
public typealias BundleError = OutpostBundles.BundleError

// MARK: - Sync

/// What one sync run did. (`OutpostSync.SyncReport`)
public typealias SyncReport = OutpostSync.SyncReport
/// When a run may send media: the connection it needs. (`OutpostSync.SyncConditions`)
public typealias SyncConditions = OutpostSync.SyncConditions
/// Whether the server is reachable, and how well. (`OutpostSync.ConnectivityStatus`)
public typealias ConnectivityStatus = OutpostSync.ConnectivityStatus
/// How the engine talks to a server; `Device(transport:)` takes another than HTTP. (`OutpostWire.SyncTransport`)
public typealias SyncTransport = OutpostWire.SyncTransport
/// Why a request to the server got no usable answer. (`OutpostWire.TransportError`)
public typealias TransportError = OutpostWire.TransportError
/// Which strategy settles concurrent changes, per entity; the server runs the same one. (`OutpostConflicts.ConflictPolicy`)
public typealias ConflictPolicy = OutpostConflicts.ConflictPolicy
/// One way of settling concurrent changes of a record. (`OutpostConflicts.ConflictStrategy`)
public typealias ConflictStrategy = OutpostConflicts.ConflictStrategy
