import Foundation
import OutpostSchema
import OutpostWire

/// Reads a pre-sync bundle for import: the night-before download a crew works from all day.
///
/// It parses and checks; it writes no database. `open(_:)` gives the bundle's records a batch at a
/// time, each checked against the schema and the catalog's rules, for the store's import to write in
/// one transaction (`LocalStore.importBundle(at:)`), and the files a zip ships, checked against their
/// digests.
public struct BundleImporter: Sendable {
    /// The bounds the bundle must keep.
    public var limits: BundleLimits

    /// An importer with the given limits.
    public init(limits: BundleLimits = .standard) {
        self.limits = limits
    }

    /// Opens the bundle at `url` (`.xml`, `.json` or `.zip`) and starts reading it ahead on a thread of
    /// its own. Close the stream when done with it, on success or failure.
    ///
    /// With `arriving`, the file is still being downloaded: the records are read as its bytes arrive,
    /// and a download that fails ends the read with an error whose cause is the download's (a zip is
    /// read once whole: its directory is at its end). `totalBytes` is then 0 until the file is whole.
    ///
    /// For an import into the database at `databasePath`, a zip's manifest is copied beside its stored
    /// files, and `checkingRoom` is given the manifest's size first, to refuse a copy the device has no
    /// room for; copies an import killed mid-way left there are removed once no running import holds them.
    public func open(
        _ url: URL, arriving: BundleArrival? = nil, forDatabaseAt databasePath: String? = nil,
        checkingRoom: (Int64) throws(BundleError) -> Void = { _ in }
    ) throws(BundleError) -> BundleRecordStream {
        let source: BundleSource
        let reader: any BundleItemReader
        do {
            let store = databasePath.map { BundleFileStore(databasePath: $0) }
            store?.sweepAbandonedIncoming(olderThan: 3600)
            source = try BundleSource(url: url, limits: limits, arrival: arriving, filesOf: store, checkingRoom: checkingRoom)
            reader = try source.reader(collecting: false)
        } catch {
            arriving?.abandon()
            throw error
        }
        let totalBytes =
            arriving.map { $0.isWhole } ?? true
            ? (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value ?? 0 : 0
        return BundleRecordStream(source: source, reader: reader, totalBytes: totalBytes)
    }

    /// The copy of a file a zip bundle shipped (a drawing's PDF, a thumbnail) that an import stored for the
    /// database at `databasePath`, found by the SHA-256 its record names; nil when no import stored it.
    /// Files live in `<database>.files/`, named by their digest.
    public static func storedFile(sha256: String, forDatabaseAt databasePath: String) -> URL? {
        BundleFileStore(databasePath: databasePath).storedFile(sha256: sha256)
    }

    /// The SHA-256 digests of the files imports stored for the database at `databasePath`.
    public static func storedFiles(forDatabaseAt databasePath: String) -> Set<String> {
        BundleFileStore(databasePath: databasePath).storedDigests()
    }

    /// Removes the stored file with this digest, once no record of the database names it; whether one
    /// went. Call it holding the database's write lock: an import stores its files right after its
    /// records commit, so a digest no committed record names under that lock is no import's.
    public static func removeStoredFile(sha256: String, forDatabaseAt databasePath: String) -> Bool {
        BundleFileStore(databasePath: databasePath).removeFile(sha256: sha256)
    }
}

/// An opened bundle's contents in document order: records a batch at a time, then the files a zip ships.
///
/// Parsing (libxml2 with the XSD, or the JSON tokenizer) runs a bounded number of records ahead on a
/// thread of its own (`ReaderThread`), so memory stays bounded however large the bundle. Used by one
/// thread at a time; not `Sendable`.
public final class BundleRecordStream {
    /// A record as the bundle gives it (synced, at the bundle's version, not orphaned), and where it stands.
    public struct Record {
        /// The record, checked against the catalog's rules.
        public let record: EntityRecord
        /// Where it stands in the bundle, for errors about it (a duplicate id).
        public let location: SourceLocation
    }

    /// The bundle's encoding.
    public var format: BundleFormat { source.format }
    /// The bundle file's size in bytes (of the zip, for a zip).
    public let totalBytes: Int64
    /// Bytes of the document read so far.
    public private(set) var bytesRead: Int64 = 0
    /// The project the bundle's header names, once read.
    public private(set) var projectID: UUID?
    /// The checkpoints of the server's history the header carries, once read (none before format
    /// version 2): the importing device asks the server to confirm each (see `BundleCheckpoints`).
    public private(set) var checkpoints: [String] = []
    /// Files the zip listed so far (always 0 for a single document).
    public var filesListed: Int { files.count }
    /// Where the document is, for errors that concern it as a whole.
    public private(set) var documentLocation: SourceLocation?
    /// Whether the bundle is a zip that may ship files.
    public var shipsFiles: Bool { source.archive != nil }

    private let source: BundleSource
    private let reader: any BundleItemReader
    private let readAhead: ReaderThread
    private var scope = ProjectScope()
    private var files: [FileReference] = []
    private var incoming: BundleFileStore.Incoming?

    init(source: BundleSource, reader: any BundleItemReader, totalBytes: Int64) {
        self.source = source
        self.reader = reader
        self.totalBytes = totalBytes
        readAhead = ReaderThread(reader)
    }

    deinit {
        // A reader waiting on a download that will not come stops first, or `finish` would wait for it.
        source.arrival?.abandon()
        readAhead.finish()
        incoming?.discard()
    }

    /// The next records, up to `maximum` and about `ReaderThread.batchBytes` of values (at least one
    /// record), nil once the document has no more. A record breaking one of the catalog's rules ends the
    /// read with its located error.
    public func nextBatch(maximum: Int = 256) throws(BundleError) -> [Record]? {
        var batch: [Record] = []
        var held = 0
        batch.reserveCapacity(maximum)
        while batch.count < maximum, held < ReaderThread.batchBytes, let entry = try readAhead.next() {
            held += entry.heldBytes
            bytesRead = entry.bytesRead
            switch entry.item {
            case .header(let header):
                projectID = header.projectID
                checkpoints = header.checkpoints
                if let refusal = scope.header(header.projectID).first { throw refusal }
            case .file(let file, _): files.append(file)
            case .record(let record, let location):
                // Held to the catalog's rules on the reader's thread already (`ReaderThread`).
                if let refusal = scope.check(record, at: location).first { throw refusal }
                if documentLocation == nil {
                    documentLocation = SourceLocation(file: location.file, archiveEntry: location.archiveEntry)
                }
                batch.append(Record(record: record, location: location))
            }
        }
        if batch.isEmpty {
            readAhead.finish()
            bytesRead = reader.bytesRead
            return nil
        }
        return batch
    }

    /// Holds a record the bundle carries to the header's project by what the importing device knows of
    /// it: the device holds it, or a parent it names, in `project` (`reason` says which, in words). A
    /// project other than the header's refuses the bundle (`outsideProject`), now or, when the header
    /// comes after the records (JSON), once it is read, by the `nextBatch()` call that reads it; so an
    /// import that calls this for every record it writes, in the transaction the stream's batches are
    /// written in, never commits a record of another project.
    public func requireProject(
        _ project: UUID, of entity: EntityType, id: UUID, because reason: String, at location: SourceLocation
    ) throws(BundleError) {
        let placement = ProjectScope.Placement(entity: entity, id: id, project: project, reason: reason, location: location)
        if let refusal = scope.place(placement) { throw refusal }
    }

    /// After the last batch: checks every file the zip listed against its size and SHA-256, and copies
    /// the ones the store of the database at `databasePath` lacks into a private folder beside it. Call
    /// inside the import's transaction, so a bad file rolls the records back; `storeFiles()` moves the
    /// copies into place once the records committed.
    /// `checkingRoom` is given each file's size before it is copied, to refuse a copy the device has no
    /// room for (a zip of 400 MB files went past the room a store keeps free, attack 69 finding 1).
    public func stageFiles(
        forDatabaseAt databasePath: String, checkingRoom: (Int64) throws(BundleError) -> Void = { _ in }
    ) throws(BundleError) {
        guard let archive = source.archive else { return }
        // Kept before the first copy, so `discardFiles()` finds the folder whatever fails.
        var copies = incoming ?? BundleFileStore(databasePath: databasePath).beginIncoming()
        incoming = copies
        for file in files {
            let destination = try copies.destination(for: file)
            incoming = copies
            if let destination {
                try checkingRoom(file.byteSize)
                try archive.extractVerified(file, to: destination)
            } else {
                try archive.verify(file)
            }
        }
    }

    /// Moves the staged copies into the store's files folder (after the import committed); returns how
    /// many were new there.
    public func storeFiles() throws(BundleError) -> Int {
        defer { incoming = nil }
        return try incoming?.commit() ?? 0
    }

    /// Drops the staged copies (the import failed).
    public func discardFiles() {
        incoming?.discard()
        incoming = nil
    }
}
