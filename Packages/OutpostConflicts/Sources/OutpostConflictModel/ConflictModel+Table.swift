import OutpostSchema

extension ConflictModel {
    /// The two-device cases the conflicts README's table shows: devices A and B hold a record with fields
    /// `a` and `b`, synced. The first five are offline writes made by A, then by B, synced in the order
    /// made and the other way round; the rest start with A's change synced and pulled by B, then B acts
    /// (or both write offline, synced both ways round).
    public static let tableCases: [TableCase] = [
        TableCase("A edits a, then B edits a", offline: [(0, .edit(["a": "A"])), (1, .edit(["a": "B"]))]),
        TableCase("A edits a, then B edits b", offline: [(0, .edit(["a": "A"])), (1, .edit(["b": "B"]))]),
        TableCase("A edits a, then B deletes", offline: [(0, .edit(["a": "A"])), (1, .delete)]),
        TableCase("A deletes, then B edits a", offline: [(0, .delete), (1, .edit(["a": "B"]))]),
        TableCase("A deletes, then B deletes", offline: [(0, .delete), (1, .delete)]),
        TableCase("A deletes; B restores it, its b changed", first: [.delete], then: .restore(["b": "B"])),
        TableCase("A edits a and deletes; B restores it unchanged", first: [.edit(["a": "A"]), .delete], then: .restore([:])),
        TableCase(
            "A deletes; B restores it unchanged, then A restores it and deletes", first: [.delete],
            offline: [(1, .restore([:])), (0, .restore([:])), (0, .delete)]),
        TableCase("A edits a; B saves a copy read before, its b changed", first: [.edit(["a": "A"])], then: .staleSave(["b": "B"])),
        TableCase("A edits a; B saves a copy read before, its a changed", first: [.edit(["a": "A"])], then: .staleSave(["a": "B"])),
        TableCase("A deletes; B saves a copy read before, unchanged", first: [.delete], then: .staleSave([:])),
        TableCase("A deletes; B saves a copy read before, its a changed", first: [.delete], then: .staleSave(["a": "B"])),
        TableCase("A deletes; B imports a bundle from before", first: [.delete], then: .importOldCopy),
        TableCase("A edits a; B imports a bundle from before", first: [.edit(["a": "A"])], then: .importOldCopy),
    ]

    /// The strategies in the table's column order.
    public static let tableStrategies: [ConflictPolicyName] = [
        .fieldMerge, .lastWriteWins, .serverWins, .manual, .clientWins, .appendOnly,
    ]

    /// The conflicts README's table, as the model computes it: one row per case and sync order, one
    /// column per strategy; each cell is what the server ends with and what was offered to whom.
    public static func table() -> String {
        var lines = [
            "| case | synced | " + tableStrategies.map(\.rawValue).joined(separator: " | ") + " |",
            "|---|---|" + String(repeating: "---|", count: tableStrategies.count),
        ]
        for tableCase in tableCases {
            for order in tableCase.orders {
                let cells = tableStrategies.map { tableCase.outcome(strategy: $0, order: order) }
                let synced = tableCase.offline.isEmpty
                    ? "A, then B" : order.first == tableCase.offline.first?.device ? "as made" : ["A", "B"][order[0]] + " first"
                lines.append("| \(tableCase.name) | \(synced) | " + cells.joined(separator: " | ") + " |")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// One row of the table.
    public struct TableCase: Sendable {
        /// The case in words.
        public let name: String
        let offline: [(device: Int, operation: Operation)]
        let first: [Operation]
        let then: Operation?

        init(_ name: String, offline: [(Int, Operation)]) {
            self.name = name
            self.offline = offline.map { (device: $0.0, operation: $0.1) }
            first = []
            then = nil
        }

        /// A case whose offline writes follow A's change, synced and pulled by B.
        init(_ name: String, first: [Operation], offline: [(Int, Operation)]) {
            self.name = name
            self.offline = offline.map { (device: $0.0, operation: $0.1) }
            self.first = first
            then = nil
        }

        init(_ name: String, first: [Operation], then: Operation) {
            self.name = name
            offline = []
            self.first = first
            self.then = then
        }

        var orders: [[Int]] { offline.isEmpty ? [[0, 1]] : [[0, 1], [1, 0]] }

        /// The cell: `deleted` or each field's value (`0`: as it was; `A`, `B`: that device's), then what
        /// was offered to whom.
        func outcome(strategy: ConflictPolicyName, order: [Int]) -> String {
            var model = ConflictModel(strategy: strategy, values: ["a": "0", "b": "0"], devices: 2)
            model.beginRound()
            if !first.isEmpty {
                for operation in first { model.apply(operation, on: 0) }
                model.sync(0)
                model.sync(1)
            }
            if offline.isEmpty {
                if let then { model.apply(then, on: 1) }
                model.sync(1)
                model.sync(0)
            } else {
                for step in offline { model.apply(step.operation, on: step.device) }
                for device in order { model.sync(device) }
                for device in order { model.sync(device) }
            }
            let server = model.server
            let state = server.isDeleted
                ? "deleted"
                : server.fieldValues.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            let names = ["A", "B"]
            let lost = model.surfaced.sorted().map { loss in
                (loss.field.map { "\($0)=\(loss.value ?? "")" } ?? (loss.isRestore ? "restore" : "delete")) + " on \(names[loss.device])"
            }
            return lost.isEmpty ? state : "\(state); lost \(lost.joined(separator: ", "))"
        }
    }
}
