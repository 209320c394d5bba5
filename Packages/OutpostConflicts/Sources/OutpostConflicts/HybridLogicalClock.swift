import Foundation

/// A node's hybrid logical clock: stamps local writes and absorbs every received stamp, so a write
/// made after seeing another always sorts after it, even when wall clocks disagree or jump back.
///
/// A value type: the owner keeps it (the store persists `last`) and passes the wall time in, so tests
/// control time and no logic here reads the system clock.
public struct HybridLogicalClock: Sendable, Hashable {
    /// Five minutes: wide enough for phones that drift between network time updates, narrow enough
    /// that a device set to the wrong day cannot win every conflict.
    public static let defaultMaximumDrift: Duration = .seconds(5 * 60)

    /// The node this clock stamps for.
    public let node: NodeID
    /// The newest stamp issued or received; restoring it after a restart keeps the clock monotonic.
    public private(set) var last: HybridTimestamp?
    /// How far a received stamp may run ahead of local wall time before `receive` refuses it.
    public let maximumDrift: Duration

    /// Creates a clock for `node`, resuming from `last` when the node has stamped before.
    public init(node: NodeID, last: HybridTimestamp? = nil, maximumDrift: Duration = Self.defaultMaximumDrift) {
        precondition(maximumDrift >= .zero, "a maximum drift cannot be negative")
        self.node = node
        self.last = last
        self.maximumDrift = maximumDrift
    }

    /// A stamp for a local write at wall time `now`: later than every stamp issued or received before,
    /// even if `now` went backwards, unless it went back by more than `maximumDrift`.
    ///
    /// A clock more than `maximumDrift` ahead of `now` can only hold this node's own stamps (`receive`
    /// refuses others that far ahead) from a time its wall clock ran ahead: a phone set to the wrong
    /// day, since corrected. Following them would stamp every later write that far ahead, and a server
    /// refuses every such write, so the clock starts again from wall time instead. What was stamped
    /// meanwhile is stamped again when a server refuses it (`LocalStore.restampRefusedClocks`).
    public mutating func tick(now: Date) -> HybridTimestamp {
        let wall = Self.milliseconds(now)
        guard let last, last.physicalMilliseconds >= wall,
            last.physicalMilliseconds - wall <= Self.milliseconds(of: maximumDrift)
        else {
            return remember(HybridTimestamp(physicalMilliseconds: wall, counter: 0, node: node))
        }
        return remember(last.successor(on: node))
    }

    /// A stamp for a local write over values stamped up to `seen`: after `seen` and after every stamp
    /// issued before, since the user wrote over what they saw. A `seen` that `receive` would refuse (this
    /// device's time is behind) is stepped past for this write only, so the clock is not dragged along.
    /// A `seen` that is this node's own stamp from a time its clock ran ahead is stepped past too: the
    /// user wrote after it, and if a server took it this write must follow it there. If no server took
    /// it, the server refuses this write as well, and the store stamps both again in order.
    public mutating func tick(now: Date, after seen: HybridTimestamp?) -> HybridTimestamp {
        let stamp = tick(now: now)
        guard let seen, seen >= stamp else { return stamp }
        if let received = try? receive(seen, now: now) { return received }
        return seen.successor(on: node)
    }

    /// Absorbs a stamp received from another node (every stamp of a pulled page, or of a pushed change)
    /// and returns a local stamp after both, refusing a stamp more than `maximumDrift` ahead of `now`.
    ///
    /// Refused, not clamped: the clock is left untouched, so a device whose wall clock is wrong cannot
    /// drag every other node's clock forward; the caller keeps the change and reports the clock error.
    public mutating func receive(_ remote: HybridTimestamp, now: Date) throws(ConflictError) -> HybridTimestamp {
        let wall = Self.milliseconds(now)
        let drift = Self.milliseconds(of: maximumDrift)
        let ahead = remote.physicalMilliseconds - wall
        guard ahead <= drift else {
            throw ConflictError(
                .clockDrift,
                message: "a clock from node \(remote.node) runs \(Self.readable(ahead)) ahead of local time, "
                    + "more than the \(Self.readable(drift)) allowed; check that device's date and time")
        }
        let local = last ?? HybridTimestamp(physicalMilliseconds: 0, counter: 0, node: node)
        let physical = max(wall, local.physicalMilliseconds, remote.physicalMilliseconds)
        if physical == wall && physical > local.physicalMilliseconds && physical > remote.physicalMilliseconds {
            return remember(HybridTimestamp(physicalMilliseconds: physical, counter: 0, node: node))
        }
        var counter: UInt16 = 0
        if physical == local.physicalMilliseconds, last != nil { counter = max(counter, local.counter) }
        if physical == remote.physicalMilliseconds { counter = max(counter, remote.counter) }
        return remember(HybridTimestamp(physicalMilliseconds: physical, counter: counter, node: node).successor(on: node))
    }

    private mutating func remember(_ stamp: HybridTimestamp) -> HybridTimestamp {
        last = stamp
        return stamp
    }

    /// Wall time in whole milliseconds, held within the range a timestamp can encode.
    static func milliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard value > 0 else { return 0 }
        return value >= Double(HybridTimestamp.maximumPhysicalMilliseconds)
            ? HybridTimestamp.maximumPhysicalMilliseconds : Int64(value)
    }

    private static func milliseconds(of duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    private static func readable(_ milliseconds: Int64) -> String {
        let seconds = Double(milliseconds) / 1000
        switch seconds {
        case 86_400...: return String(format: "%.1f days", seconds / 86_400)
        case 3_600...: return String(format: "%.1f hours", seconds / 3_600)
        case 60...: return String(format: "%.1f minutes", seconds / 60)
        default: return String(format: "%.3f s", seconds)
        }
    }
}
