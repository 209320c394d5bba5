import GRDB

extension LocalStore {
    /// Free pages that make a file worth packing: a quarter of it, and at least this many (1 MiB of 4 KiB
    /// pages), so a small store is never rewritten for a few kilobytes.
    static let compactionMinimumFreePages = 256

    /// Packs the file (SQLite's `VACUUM`) once a quarter or more of its pages are free, as a sync that
    /// drained a large queue leaves it: the mutations' pages go to the free list, and the field clocks
    /// each acknowledged write shortened leave their pages part empty, which SQLite never merges. A
    /// crew's synced store took 588 KB per 1,000 issues with those pages, 510 KB packed (issue 41).
    ///
    /// Run by `finishRun` after a complete run, on the writer: the app's writes wait for it (about a
    /// tenth of a second per 10 MB here), reads go on. Skipped, keeping the file as it is, when the
    /// volume lacks room for SQLite's copy of the file and its log beside what the store keeps free.
    /// `VACUUM` is one transaction: a kill midway leaves the file as it was. A failure is no reason to
    /// call the sync failed; the next complete run tries again. Returns whether the file was packed.
    @discardableResult
    func compactIfWorthwhile() -> Bool {
        do {
            let (pages, free, pageSize) = try pool.read { db in
                (
                    try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
                    try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0,
                    try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
                )
            }
            guard free >= Self.compactionMinimumFreePages, free * 4 >= pages else { return false }
            // SQLite builds the packed copy in a temporary file, then writes it through the WAL: twice the
            // pages in use, beside the room the store keeps for the user's writes (thrown short of it).
            try checkRoomForPulledData(waiting: "packing waits", needing: Int64(pages - free) * Int64(pageSize) * 2)
            try pool.vacuum()
            // The WAL now holds the whole file: back into it and cut short, where no reader holds it.
            // A background copy the vacuum's commit asked for would make this one busy: it goes first,
            // waited for on the writer, so that no commit between the two asks for another.
            _ = try? pool.writeWithoutTransaction { db in
                checkpointer.waitForPendingCheckpoint()
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            return true
        } catch {
            return false
        }
    }
}
