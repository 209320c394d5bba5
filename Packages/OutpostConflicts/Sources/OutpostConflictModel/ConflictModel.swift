import OutpostSchema

/// The reference model of what Outpost does with one record written on several devices: the rule the
/// conflicts README's table states, written down once so that a seeded run of the real devices and
/// server (`outpost-reliability --scenario convergence`) can be checked against it, step for step.
///
/// It knows nothing of stores, queues or wires. A record is a few text fields; every write has a time
/// (its place in the order writes were made: larger is newer); a device holds a view of the record and at
/// most one change the server has not taken yet (its offline writes, as its queue folds them); a sync
/// pulls the server's record, settles the change against it by the strategy, and pushes what is left.
/// The model answers two questions after any sequence of steps and syncs: what the server holds, and
/// which values (and deletes) lost and were offered to a user, on which device.
///
/// The rules, per strategy, for a device's change meeting the server's record:
///
/// - **fieldMerge**: each field keeps its newest write; a delete stands only if newer than every field.
///   A value that loses to a newer one is surfaced; so are the values a standing delete hides that the
///   deleting device never saw, and a delete that an edit after it undid.
/// - **lastWriteWins**: the side with the newest write stands whole (a change stands over the fields it
///   carries, the rest is kept). What the losing side held that differs is surfaced, and a winning delete
///   hides every value of the older live side, which is surfaced.
/// - **serverWins**, **manual**: a change made on the server's current version applies; a concurrent one
///   changes nothing, and its values and delete are surfaced (manual: as an open conflict).
/// - **clientWins**: the change always applies; on a concurrent change what it replaced is surfaced: the
///   server's values it overwrote, a delete it undid, the values its delete hides.
/// - **appendOnly**: a delete applies; an edit changes nothing and its values are offered back (every
///   value, when it tried to bring a deleted record back: a delete is final).
///
/// A value is surfaced on the device whose sync settled the conflict, and only when the two sides
/// differ; a server value is surfaced only if that device had not already seen it (it deliberately wrote
/// over it). A write that brings a record back from the delete the device knew of is made after that
/// delete, so it is sequential to it; fields it only carried take the server's newest values. A copy
/// read before others changed the record writes only the fields its user changed: one the server changed
/// meanwhile is written and the server's value surfaced; over a delete, nothing is written when the user
/// changed nothing, else the write brings the record back and the delete, which its user never saw, is
/// surfaced if the record does come back. An older copy (a bundle from before) never changes what a
/// device holds.
public struct ConflictModel: Sendable {
    /// The strategy settling the record.
    public let strategy: ConflictPolicyName
    /// The record's fields.
    public let fields: [String]
    /// What the server holds.
    public private(set) var server: Record
    /// Every loss surfaced so far, in the order the syncs surfaced them.
    public private(set) var surfaced: [Loss] = []
    private var devices: [Device]
    private var time = 0
    private var lastID = 0

    /// A record held by `devices` devices, all synced, with `values` (written before anything the model
    /// is told, seen by every device).
    public init(strategy: ConflictPolicyName, values: [String: String], devices count: Int) {
        self.strategy = strategy
        fields = values.keys.sorted()
        var record = Record(values: [:], deletion: nil, version: 1)
        for (field, value) in values { record.values[field] = Write(value: value, time: 0, device: -1, id: 0) }
        server = record
        devices = Array(repeating: Device(view: record, seen: [0]), count: count)
    }

    // MARK: What a device does

    /// Whether `device` can make `operation` now: an edit or delete of a record it holds live, a restore of
    /// one it holds deleted (with no change of its own waiting), a stale save or old import after
    /// `beginRound`.
    ///
    /// Not modelled: a write over the device's own delete that has not reached the server yet (the queue
    /// sends the delete, then the write; a merge in between settles both as one). The store's own tests
    /// cover it (`DeletesAndRevivalsTests`).
    public func allows(_ operation: Operation, on device: Int) -> Bool {
        let held = devices[device]
        switch operation {
        case .edit, .delete: return !held.view.isDeleted
        case .restore: return held.view.isDeleted && held.change == nil
        case .staleSave: return held.screen != nil && held.change?.deletion == nil
        case .importOldCopy: return true
        }
    }

    /// Every device reads the record as a screen keeps it, and a bundle of it is downloaded: what a later
    /// `staleSave` saves and `importOldCopy` imports.
    public mutating func beginRound() {
        for index in devices.indices { devices[index].screen = devices[index].view }
    }

    /// `device` makes `operation`, now (after every earlier step). Returns false, changing nothing, when
    /// it cannot (`allows`).
    @discardableResult
    public mutating func apply(_ operation: Operation, on device: Int) -> Bool {
        guard allows(operation, on: device) else { return false }
        time += 1
        var held = devices[device]
        var change = held.change ?? Change(base: held.view.version)
        switch operation {
        case .edit(let values):
            for (field, value) in values.sorted(by: { $0.key < $1.key }) {
                let write = newWrite(value, device)
                held.view.values[field] = write
                change.writes[field] = write
                change.carried.remove(field)
            }
        case .delete:
            let deletion = Deletion(time: time, id: nextID())
            held.view.deletion = deletion
            change.deletion = deletion
        case .restore(let values):
            change.revives = held.view.deletion?.id
            bringBack(&held, &change, userValues: values, device: device)
        case .staleSave(let values):
            guard let screen = held.screen else { return false }
            // Only what the user changed since reading counts; a field someone else changed meanwhile
            // is written all the same, and the value it replaces (come by a pull) is surfaced.
            let changed = values.filter { screen.values[$0.key]?.value != $0.value }
            for field in changed.keys.sorted() {
                guard let now = held.view.values[field], now.value != screen.values[field]?.value, now.device != device
                else { continue }
                surfaced.append(Loss(device: device, field: field, value: now.value))
            }
            if held.view.isDeleted {
                // Nothing changed: the delete stands. Else the record comes back, and the delete, which its
                // user never saw, is offered once the server keeps the record back (`sync`).
                guard !changed.isEmpty else { return true }
                change.revives = held.view.deletion?.id
                change.deleteUnseen = true
                bringBack(&held, &change, userValues: changed, device: device)
            } else {
                guard !changed.isEmpty else { return true }
                for (field, value) in changed.sorted(by: { $0.key < $1.key }) {
                    let write = newWrite(value, device)
                    held.view.values[field] = write
                    change.writes[field] = write
                    change.carried.remove(field)
                }
            }
        case .importOldCopy:
            return true  // older than what the device holds, or than a delete it was told of
        }
        held.change = change
        devices[device] = held
        return true
    }

    /// `device` syncs to completion: it pulls the server's record, settles its waiting change against it,
    /// and pushes what is left, which the server takes as it is (nothing else reaches the server between).
    public mutating func sync(_ device: Int) {
        var held = devices[device]
        guard var change = held.change else {
            held.view = server.viewed(over: held.view)
            held.seen.formUnion(server.deletion == nil ? server.writeIDs : [])
            devices[device] = held
            return
        }
        // Fields carried to bring the record back take the server's values (newest there are).
        for field in change.carried {
            if let current = server.values[field] { change.writes[field]?.value = current.value }
        }
        let revivesThisDelete = change.revives != nil && change.revives == server.deletion?.id
        let concurrent = change.base < server.version && !revivesThisDelete
        var losses: [Loss] = []
        var usersValueLost = false
        let merged = settle(
            change, concurrent: concurrent, seen: held.seen, holding: held.view, device: device, losses: &losses,
            usersValueLost: &usersValueLost)
        if change.deleteUnseen, revivesThisDelete, !merged.isDeleted { losses.append(Loss(device: device, field: nil, value: nil)) }
        // A restore that a delete undid, with no value of its user's offered: the restore itself is offered
        // (overriding it brings the record back). Unlisted, it went without a trace under every strategy
        // but append only, which listed each field it only carried instead.
        if change.revives != nil, change.deletion == nil, merged.isDeleted, !usersValueLost {
            losses.append(Loss(device: device, field: nil, value: nil, isRestore: true))
        }
        surfaced += losses
        if merged != server {
            server = merged
            server.version += 1
        }
        held.view = server
        held.seen.formUnion(server.writeIDs)
        held.change = nil
        devices[device] = held
    }

    /// What `device` holds now (a tombstone it pulled keeps the values it had).
    public func view(of device: Int) -> Record { devices[device].view }

    // MARK: The rules

    private func settle(
        _ change: Change, concurrent: Bool, seen: Set<Int>, holding view: Record, device: Int, losses: inout [Loss],
        usersValueLost: inout Bool
    ) -> Record {
        let server = self.server
        func unseen(_ write: Write) -> Bool { !seen.contains(write.id) && write.device != device }
        // A server value the device holds the same is not hidden from it: it saw that value when it wrote
        // over it or deleted the record (a restore stamps every field anew; attack 133, F4).
        func lose(server field: String) {
            if let write = server.values[field], unseen(write), write.value != view.values[field]?.value {
                losses.append(Loss(device: device, field: field, value: write.value))
            }
        }
        // A field a restore only carried is not its user's (it holds the server's value): it is never offered
        // back (attack 132, F6); a restore that lost with no value of its own is offered as a restore (`sync`).
        var ownLosses: [Loss] = []
        defer {
            let users = ownLosses.filter { !change.carried.contains($0.field ?? "") }
            losses += users
            usersValueLost = !users.isEmpty
        }
        func lose(own field: String, _ value: String) { ownLosses.append(Loss(device: device, field: field, value: value)) }
        func loseDelete(own: Bool) {
            if own || change.revives != server.deletion?.id { losses.append(Loss(device: device, field: nil, value: nil)) }
        }
        var merged = server
        let ownFields = change.writes.keys.sorted()

        switch strategy {
        case .fieldMerge:
            var fromChange: Set<String> = []
            for field in ownFields {
                let write = change.writes[field]!, current = server.values[field]!
                if write.time > current.time {
                    merged.values[field] = write
                    fromChange.insert(field)
                    if write.value != current.value { lose(server: field) }
                } else if write.value != current.value {
                    lose(own: field, write.value)
                }
            }
            let newestDelete = [change.deletion, server.deletion].compactMap { $0 }.max { $0.time < $1.time }
            if let newestDelete, merged.values.values.allSatisfy({ $0.time < newestDelete.time }) {
                merged.deletion = newestDelete
                // What the delete hides and the other side never saw.
                if change.deletion == nil {
                    for field in fromChange.sorted() where server.values[field]?.value != merged.values[field]?.value {
                        lose(own: field, merged.values[field]!.value)
                    }
                }
                if server.deletion == nil {
                    for field in fields where !fromChange.contains(field) && change.writes[field]?.value != merged.values[field]?.value {
                        lose(server: field)
                    }
                }
            } else if let newestDelete {
                merged.deletion = nil
                loseDelete(own: newestDelete == change.deletion)
            }
        case .lastWriteWins:
            let changeNewest = (change.writes.values.map(\.time) + [change.deletion?.time ?? -1]).max()!
            let serverNewest = (server.values.values.map(\.time) + [server.deletion?.time ?? -1]).max()!
            if changeNewest > serverNewest {
                for field in ownFields {
                    if change.writes[field]!.value != server.values[field]!.value { lose(server: field) }
                    merged.values[field] = change.writes[field]
                }
                if let deletion = change.deletion {
                    if server.deletion == nil { for field in fields where change.writes[field] == nil { lose(server: field) } }
                    merged.deletion = deletion
                } else {
                    if server.deletion != nil { loseDelete(own: false) }
                    merged.deletion = nil
                }
            } else {
                for field in ownFields where change.writes[field]!.value != server.values[field]!.value {
                    lose(own: field, change.writes[field]!.value)
                }
                if change.deletion != nil, server.deletion == nil { loseDelete(own: true) }
            }
        case .serverWins, .manual, .clientWins:
            if concurrent, strategy != .clientWins {
                for field in ownFields where change.writes[field]!.value != server.values[field]!.value {
                    lose(own: field, change.writes[field]!.value)
                }
                if change.deletion != nil, server.deletion == nil { loseDelete(own: true) }
                return server
            }
            if concurrent {
                for field in ownFields where change.writes[field]!.value != server.values[field]!.value { lose(server: field) }
                if change.deletion == nil, server.deletion != nil { loseDelete(own: false) }
                if change.deletion != nil, server.deletion == nil {
                    for field in fields where change.writes[field] == nil { lose(server: field) }
                }
            }
            for field in ownFields { merged.values[field] = change.writes[field] }
            merged.deletion = change.deletion
        case .appendOnly:
            if let deletion = change.deletion {
                merged.deletion = [deletion, server.deletion].compactMap { $0 }.max { $0.time < $1.time }
                return merged
            }
            for field in ownFields where server.isDeleted || change.writes[field]!.value != server.values[field]!.value {
                lose(own: field, change.writes[field]!.value)
            }
            return server
        }
        return merged
    }

    // MARK: Bookkeeping

    private mutating func nextID() -> Int {
        lastID += 1
        return lastID
    }

    private mutating func newWrite(_ value: String, _ device: Int) -> Write {
        Write(value: value, time: time, device: device, id: nextID())
    }

    /// A write over the device's tombstone: every field is written now, the user's values and the
    /// carried ones (the device's held values, until the change meets the server's record).
    private mutating func bringBack(_ held: inout Device, _ change: inout Change, userValues: [String: String], device: Int) {
        held.view.deletion = nil
        change.deletion = nil
        for field in fields {
            let value = userValues[field] ?? held.view.values[field]?.value ?? ""
            let write = newWrite(value, device)
            held.view.values[field] = write
            change.writes[field] = write
            if userValues[field] == nil { change.carried.insert(field) } else { change.carried.remove(field) }
        }
    }

    private struct Device: Sendable {
        var view: Record
        var seen: Set<Int>
        var change: Change?
        var screen: Record?
    }

    private struct Change: Sendable {
        var base: Int
        var writes: [String: Write] = [:]
        var carried: Set<String> = []
        var deletion: Deletion?
        var revives: Int?
        var deleteUnseen = false
    }
}

extension ConflictModel {
    /// What a device does to the record.
    public enum Operation: Hashable, Sendable {
        /// Writes these fields.
        case edit([String: String])
        /// Deletes the record.
        case delete
        /// Brings back the record the device holds deleted, with these fields changed (none: as it was).
        case restore([String: String])
        /// Saves the copy a screen read at `beginRound`, with these fields changed by its user (none: unchanged).
        case staleSave([String: String])
        /// Imports the bundle downloaded at `beginRound`.
        case importOldCopy
    }

    /// A value or delete that lost and was offered to a user.
    public struct Loss: Hashable, Sendable, Comparable, CustomStringConvertible {
        /// The device whose conflicts table holds it.
        public let device: Int
        /// The field; nil for a delete.
        public let field: String?
        /// The value that lost; nil for a delete or a restore.
        public let value: String?
        /// Whether a restore lost (a write that brought the record back, undone by a delete), not a delete;
        /// only with no field.
        public let isRestore: Bool

        /// A loss as the model or a device's conflicts table states it.
        public init(device: Int, field: String?, value: String?, isRestore: Bool = false) {
            self.device = device
            self.field = field
            self.value = value
            self.isRestore = isRestore
        }

        public static func < (a: Loss, b: Loss) -> Bool {
            (a.device, a.field ?? "", a.value ?? "", a.isRestore ? 1 : 0) < (b.device, b.field ?? "", b.value ?? "", b.isRestore ? 1 : 0)
        }

        public var description: String {
            field.map { "\($0)=\(value ?? "null") on device \(device)" }
                ?? "the \(isRestore ? "restore" : "delete") on device \(device)"
        }
    }

    /// The record as the server (or a device) holds it.
    public struct Record: Hashable, Sendable {
        var values: [String: Write]
        var deletion: Deletion?
        var version: Int

        /// Whether the record is deleted.
        public var isDeleted: Bool { deletion != nil }
        /// Each field's value; a deleted record's last values.
        public var fieldValues: [String: String] { values.mapValues(\.value) }

        var writeIDs: Set<Int> { Set(values.values.map(\.id)) }

        /// The server's record as a device holds it after pulling it: a delete comes without contents,
        /// so the device keeps the values it had.
        func viewed(over held: Record) -> Record {
            guard deletion != nil else { return self }
            var view = held
            view.deletion = deletion
            view.version = version
            return view
        }
    }

    struct Write: Hashable, Sendable {
        var value: String
        var time: Int
        var device: Int
        var id: Int
    }

    struct Deletion: Hashable, Sendable {
        var time: Int
        var id: Int
    }
}
