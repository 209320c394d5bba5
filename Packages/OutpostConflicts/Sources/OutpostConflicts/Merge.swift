import OutpostSchema

/// The merge rules behind the strategies. Every function is pure: the result depends only on the two
/// versions, so the device and the server reach the same answer.
enum Merge {
    /// Per field, the value with the newer clock (equal clocks: the larger value); the delete stands
    /// only if it is newer than every field it hides. A join of two lattices, hence commutative,
    /// associative and idempotent for any field sets.
    static func fieldMerge(client: VersionedRecord, server: VersionedRecord) -> ConflictResolution {
        var fields = server.record.fields
        var clocks = server.clocks
        var sources = clocks.mapValues { _ in Side.server }  // keeps the hash layout: no rehashing
        var losers: [LosingValue] = []

        for (field, clientClock) in client.clocks {
            let clientValue = client.record[field]
            guard let serverClock = clocks[field] else {
                fields[field] = clientValue
                clocks[field] = clientClock
                sources[field] = .client
                continue
            }
            let serverValue = server.record[field]
            let sameValue = clientValue == serverValue
            if clientClock > serverClock
                || (clientClock == serverClock && !sameValue && FieldValue.precedes(serverValue, clientValue))
            {
                fields[field] = clientValue
                clocks[field] = clientClock
                sources[field] = .client
                if !sameValue {
                    losers.append(LosingValue(field: field, value: serverValue, clock: serverClock, side: .server))
                }
            } else if !sameValue {
                losers.append(LosingValue(field: field, value: clientValue, clock: clientClock, side: .client))
            }
        }

        let tombstone = newer(client.deletion, server.deletion)
        var deletion: HybridTimestamp?
        if let tombstone, clocks.values.allSatisfy({ $0 < tombstone }) { deletion = tombstone }
        var losingDeletion: LosingDeletion?
        if deletion == nil, let tombstone {
            losingDeletion = LosingDeletion(clock: tombstone, side: client.deletion == tombstone ? .client : .server)
        } else if deletion != nil {
            // Edits the deleting side never saw lose to the delete; surface them.
            for side in [Side.client, .server] where version(side, client, server).deletion == nil {
                let other = version(side == .client ? .server : .client, client, server)
                for (field, from) in sources where from == side && other.record.fields[field] != fields[field] {
                    losers.append(LosingValue(field: field, value: fields[field]!, clock: clocks[field]!, side: side))
                }
            }
        }
        return ConflictResolution(
            merged: build(client, server, fields, clocks, deletion), sources: sources, losingValues: losers,
            losingDeletion: losingDeletion)
    }

    /// The version with the newest clock stands whole; fields only the other carries are kept. When
    /// both carry the same newest write, fields merge. For whole records (every field on both sides,
    /// as stored and pulled) this is commutative, associative and idempotent.
    ///
    /// A winning delete hides what the older live version carries: those values are kept as the
    /// tombstone's last values (what a revival brings back) and are surfaced as lost, as field merge
    /// surfaces edits a delete hid. The device leaves out server values it had already seen.
    static func lastWriteWins(client: VersionedRecord, server: VersionedRecord) -> ConflictResolution {
        let (clientNewest, serverNewest) = (client.newestClock, server.newestClock)
        if clientNewest == serverNewest { return fieldMerge(client: client, server: server) }
        let clientWins = clientNewest.map { newest in serverNewest.map { newest > $0 } ?? true } ?? false
        let (winner, loser) = clientWins ? (client, server) : (server, client)
        let (winnerSide, loserSide): (Side, Side) = clientWins ? (.client, .server) : (.server, .client)

        var fields = winner.record.fields
        var clocks = winner.clocks
        var sources = clocks.mapValues { _ in winnerSide }
        var losers: [LosingValue] = []
        for (field, loserClock) in loser.clocks {
            let loserValue = loser.record[field]
            if let winnerValue = fields[field] {
                if winnerValue != loserValue {
                    losers.append(LosingValue(field: field, value: loserValue, clock: loserClock, side: loserSide))
                }
            } else {
                fields[field] = loserValue
                clocks[field] = loserClock
                sources[field] = loserSide
                if winner.deletion != nil, loser.deletion == nil {
                    losers.append(LosingValue(field: field, value: loserValue, clock: loserClock, side: loserSide))
                }
            }
        }
        var losingDeletion: LosingDeletion?
        if winner.deletion == nil, let lost = loser.deletion {
            losingDeletion = LosingDeletion(clock: lost, side: loserSide)
        }
        return ConflictResolution(
            merged: build(client, server, fields, clocks, winner.deletion), sources: sources, losingValues: losers,
            losingDeletion: losingDeletion)
    }

    /// The server's version stands exactly; every client value that differs (with
    /// `surfacingEveryValue`, every client value), and a client delete of a live record, is surfaced.
    static func serverStands(
        client: VersionedRecord, server: VersionedRecord, openConflict: Bool = false, refusal: Bool = false,
        surfacingEveryValue: Bool = false
    ) -> ConflictResolution {
        var losers: [LosingValue] = []
        for (field, clientClock) in client.clocks {
            let clientValue = client.record[field]
            // A key the server's record leaves out holds null: an optional field a pusher omitted.
            if surfacingEveryValue || server.record[field] != clientValue {
                losers.append(LosingValue(field: field, value: clientValue, clock: clientClock, side: .client))
            }
        }
        var losingDeletion: LosingDeletion?
        if server.deletion == nil, let lost = client.deletion {
            losingDeletion = LosingDeletion(clock: lost, side: .client)
        }
        let differs = !losers.isEmpty || losingDeletion != nil
        return ConflictResolution(
            merged: build(client, server, server.record.fields, server.clocks, server.deletion),
            sources: server.clocks.mapValues { _ in .server }, losingValues: losers, losingDeletion: losingDeletion,
            isOpenConflict: openConflict && differs, isRefusal: refusal && differs)
    }

    /// The client's change applies over the server's version, its delete or re-create included. With
    /// `surfacing`, what it replaced is surfaced: server values it overwrote, a server delete it undid,
    /// and the server's values a client delete hides, whenever they were stamped (a note a teammate
    /// added a moment before the delete is lost to it as much as one added after). The device leaves
    /// out the values it had already seen, so only the edits the deleting side never saw remain.
    static func clientApplies(client: VersionedRecord, server: VersionedRecord, surfacing: Bool) -> ConflictResolution {
        var fields = server.record.fields
        var clocks = server.clocks
        var sources = clocks.mapValues { _ in Side.server }  // keeps the hash layout: no rehashing
        var losers: [LosingValue] = []
        for (field, clientClock) in client.clocks {
            let clientValue = client.record[field]
            if surfacing, let serverClock = clocks[field], let serverValue = fields[field], serverValue != clientValue {
                losers.append(LosingValue(field: field, value: serverValue, clock: serverClock, side: .server))
            }
            fields[field] = clientValue
            clocks[field] = clientClock
            sources[field] = .client
        }
        var losingDeletion: LosingDeletion?
        if surfacing {
            if client.deletion == nil, let lost = server.deletion {
                losingDeletion = LosingDeletion(clock: lost, side: .server)
            } else if client.deletion != nil, server.deletion == nil {
                for (field, clock) in server.clocks where client.clocks[field] == nil {
                    losers.append(LosingValue(field: field, value: server.record[field], clock: clock, side: .server))
                }
            }
        }
        return ConflictResolution(
            merged: build(client, server, fields, clocks, client.deletion), sources: sources, losingValues: losers,
            losingDeletion: losingDeletion)
    }

    /// Creates never conflict and deletes apply; any other difference is an edit and is refused. A
    /// write to a deleted record (an edit, or an attempt to bring it back) is refused whole: every value
    /// it carries is offered, for the user to save as a new record, since a delete is final.
    static func appendOnly(client: VersionedRecord, server: VersionedRecord) -> ConflictResolution {
        if let clientDeletion = client.deletion {
            let deletion = newer(clientDeletion, server.deletion)
            return ConflictResolution(
                merged: build(client, server, server.record.fields, server.clocks, deletion),
                sources: server.clocks.mapValues { _ in .server }, losingValues: [], losingDeletion: nil)
        }
        return serverStands(client: client, server: server, refusal: true, surfacingEveryValue: server.deletion != nil)
    }

    /// Whether the server took writes the client had not seen: the client's change is based on an
    /// older server version. Only the role-based strategies ask; clock-based ones need no base.
    static func isConcurrent(client: VersionedRecord, server: VersionedRecord) -> Bool {
        client.record.sync.version < server.record.sync.version
    }

    private static func build(
        _ client: VersionedRecord, _ server: VersionedRecord, _ fields: [String: FieldValue],
        _ clocks: [String: HybridTimestamp], _ deletion: HybridTimestamp?
    ) -> VersionedRecord {
        let sync = SyncMetadata.merged(client.record.sync, server.record.sync, deletion: deletion)
        let record = EntityRecord(entity: server.record.entity, id: server.record.id, fields: fields, sync: sync)
        return VersionedRecord(unchecked: record, clocks: clocks, deletion: deletion)
    }

    private static func version(_ side: Side, _ client: VersionedRecord, _ server: VersionedRecord) -> VersionedRecord {
        side == .client ? client : server
    }

    private static func newer(_ a: HybridTimestamp?, _ b: HybridTimestamp?) -> HybridTimestamp? {
        guard let a else { return b }
        guard let b else { return a }
        return Swift.max(a, b)
    }
}
