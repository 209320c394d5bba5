import Foundation

/// Who waits on whom among unfinished mutations: a mutation waits on the earlier unfinished mutation
/// of its record and on the unfinished creates of the records it references. Used to tell which
/// mutations can never go: those behind a failed one, and those in, or behind, a cycle of waits.
struct WaitGraph {
    private let queue: [Mutation]
    /// For each mutation (by position in `queue`), the positions it waits on.
    private var waitsOn: [[Int]]

    /// The graph of `queue`, unfinished mutations in queue order.
    init(_ queue: [Mutation]) {
        self.queue = queue
        var creates: [UUID: Int] = [:]
        for (position, mutation) in queue.enumerated() where mutation.operation == .create {
            creates[mutation.recordID] = position
        }
        var previous: [UUID: Int] = [:]
        var waitsOn = Array(repeating: [Int](), count: queue.count)
        for (position, mutation) in queue.enumerated() {
            if let earlier = previous[mutation.recordID] { waitsOn[position].append(earlier) }
            previous[mutation.recordID] = position
            for parent in mutation.dependsOn {
                if let create = creates[parent], create != position { waitsOn[position].append(create) }
            }
        }
        self.waitsOn = waitsOn
    }

    /// The mutations that are not failed but can never be sent, with the sequences that hold each.
    func blocked() -> [(mutation: Mutation, blockedBy: [Int64])] {
        var holders = Array(repeating: Set<Int64>(), count: queue.count)
        var dependents = Array(repeating: [Int](), count: queue.count)
        for (position, waits) in waitsOn.enumerated() {
            for target in waits { dependents[target].append(position) }
        }
        // Behind a failed mutation: spread each failed one's sequence to everything waiting on it.
        var work: [Int] = []
        for (position, mutation) in queue.enumerated() where mutation.status == .failed {
            holders[position] = [mutation.sequence]
            work.append(position)
        }
        while let position = work.popLast() {
            for dependent in dependents[position] where queue[dependent].status != .failed {
                let before = holders[dependent].count
                holders[dependent].formUnion(holders[position])
                if holders[dependent].count != before { work.append(dependent) }
            }
        }
        // In or behind a cycle: what is left once every mutation whose waits can all end is taken away
        // (a wait on a failed mutation counts as ending: that is reported above).
        let stuck = cycleBound()
        if !stuck.isEmpty {
            let core = Set(Self.core(of: stuck, waitsOn: waitsOn).map { queue[$0].sequence })
            for position in stuck { holders[position].formUnion(core) }
        }
        return queue.indices.filter { queue[$0].status != .failed && !holders[$0].isEmpty }
            .map { (queue[$0], holders[$0].sorted()) }
    }

    /// Positions of the mutations that are in a cycle of waits or wait on one.
    private func cycleBound() -> Set<Int> {
        var remaining = Array(repeating: 0, count: queue.count)
        var dependents = Array(repeating: [Int](), count: queue.count)
        for (position, waits) in waitsOn.enumerated() where queue[position].status != .failed {
            for target in waits where queue[target].status != .failed {
                remaining[position] += 1
                dependents[target].append(position)
            }
        }
        var free = queue.indices.filter { queue[$0].status != .failed && remaining[$0] == 0 }
        var freed = Set(free)
        while let position = free.popLast() {
            for dependent in dependents[position] {
                remaining[dependent] -= 1
                if remaining[dependent] == 0, freed.insert(dependent).inserted { free.append(dependent) }
            }
        }
        return Set(queue.indices.filter { queue[$0].status != .failed && !freed.contains($0) })
    }

    /// The cycles among `stuck`: what is left once the mutations nothing in `stuck` waits on are taken
    /// away, over and over (a mutation merely waiting on a cycle is taken away that way).
    private static func core(of stuck: Set<Int>, waitsOn: [[Int]]) -> Set<Int> {
        var core = stuck
        var changed = true
        while changed {
            changed = false
            let waitedOn = Set(core.flatMap { waitsOn[$0] }.filter { core.contains($0) })
            for position in core where !waitedOn.contains(position) {
                core.remove(position)
                changed = true
            }
        }
        return core
    }
}
