import Foundation

/// Work read ahead of its consumer: one producer hands elements to one consumer, at most `depth` of
/// them waiting at a time, so the two overlap while memory stays bounded. The one pipeline of its kind
/// in Outpost: a bundle's records parsed on a thread of their own while the store writes the batch
/// before (`BundleRecordStream`), and pull pages fetched while the engine applies the page before
/// (`PullPrefetch`).
///
/// Each side waits in the way its context allows. A producer or consumer on a thread of its own (the
/// bundle's parser, the store's writer) blocks: `roomBlocking()`, `nextBlocking()`. One on Swift's
/// cooperative pool suspends instead: `room()`, `next()`, for that pool has one thread per core and a
/// blocked one stalls every other task.
///
/// The producer asks for room before it produces an element (`room`), then hands it (`hand`), and says
/// when it is done (`end`, with its error if it failed). The consumer takes elements in order until nil
/// (the end) or the producer's error, and calls `stop()` once it wants no more: the producer's next
/// `room` is then false. `stopAndWait()` also waits for the producer's `end`, for a producer that must
/// not outlive its consumer (a parser whose document is about to be closed).
public final class ReadAhead<Element: Sendable, Failure: Error>: @unchecked Sendable {
    private let depth: Int
    private let weightLimit: Int
    // Everything below is guarded by `condition`.
    private let condition = NSCondition()
    /// What was handed and not yet taken, each with its weight (`hand(_:weight:)`).
    private var waiting: [(element: Element, weight: Int)] = []
    private var ended = false
    private var failure: Failure?
    private var stopped = false
    /// Room the producer asked for and got, not yet handed: counted against `depth`.
    private var reserved = 0
    private var suspendedConsumer: CheckedContinuation<Void, Never>?
    private var suspendedProducer: CheckedContinuation<Void, Never>?

    /// An empty pipeline letting at most `depth` (at least 1) elements be produced and not yet taken,
    /// and no more once the weights of those waiting (`hand(_:weight:)`) reach `weightLimit`: pull pages
    /// wait ahead by their bytes too, for a page of a hostile server may be five times an honest one's.
    /// One element may always wait, however heavy.
    public init(depth: Int, weightLimit: Int = .max) {
        self.depth = max(depth, 1)
        self.weightLimit = weightLimit
    }

    /// Whether one more element may be produced; under the lock.
    private var hasRoom: Bool {
        // Summed when asked: at most `depth` wait, a handful.
        waiting.count + reserved < depth && waiting.reduce(0) { $0 + $1.weight } < weightLimit
    }

    // MARK: - Producer

    /// Waits, blocking this thread, until one more element may be produced; false once the consumer
    /// stopped (produce nothing more, and `end`).
    public func roomBlocking() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !stopped && !hasRoom {
            condition.wait()
        }
        guard !stopped else { return false }
        reserved += 1
        return true
    }

    /// Waits, suspended, until one more element may be produced; false once the consumer stopped.
    public func room() async -> Bool {
        while true {
            let answer: Bool? = locked {
                if stopped { return false }
                guard hasRoom else { return nil }
                reserved += 1
                return true
            }
            if let answer { return answer }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = locked {
                    if stopped || hasRoom { return true }
                    suspendedProducer = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Hands over an element produced in the room `room` gave, of `weight` (see `init`); never waits.
    public func hand(_ element: Element, weight: Int = 0) {
        let consumer: CheckedContinuation<Void, Never>? = locked {
            reserved = max(reserved - 1, 0)
            guard !stopped else { return nil }
            waiting.append((element, weight))
            condition.broadcast()
            return takeSuspendedConsumer()
        }
        consumer?.resume()
    }

    /// Says the producer is done: after the elements handed, the consumer meets `failure`, or the end.
    public func end(throwing failure: Failure? = nil) {
        let consumer: CheckedContinuation<Void, Never>? = locked {
            ended = true
            self.failure = failure
            condition.broadcast()
            return takeSuspendedConsumer()
        }
        consumer?.resume()
    }

    // MARK: - Consumer

    /// The next element, blocking this thread until there is one; nil at the end; the producer's error
    /// where it happened (after every element handed before it).
    public func nextBlocking() throws(Failure) -> Element? {
        condition.lock()
        while waiting.isEmpty && !ended {
            condition.wait()
        }
        let outcome = takeNext()
        condition.unlock()
        return try outcome.element()
    }

    /// The next element, suspended until there is one; nil at the end, or once the calling task is
    /// cancelled (as an `AsyncStream`'s iterator ends); the producer's error where it happened.
    public func next() async throws(Failure) -> Element? {
        while true {
            let outcome: Outcome? = locked { waiting.isEmpty && !ended ? nil : takeNext() }
            if let outcome { return try outcome.element() }
            if Task.isCancelled { return nil }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = locked {
                        if !waiting.isEmpty || ended || Task.isCancelled { return true }
                        suspendedConsumer = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                locked { takeSuspendedConsumer() }?.resume()
            }
        }
    }

    /// Wants no more elements: what waits is dropped, and the producer's `room` answers false from now on.
    public func stop() {
        let producer: CheckedContinuation<Void, Never>? = locked {
            stopped = true
            waiting.removeAll()
            condition.broadcast()
            defer { suspendedProducer = nil }
            return suspendedProducer
        }
        producer?.resume()
    }

    /// `stop()`, then waits, blocking this thread, until the producer has called `end`.
    public func stopAndWait() {
        stop()
        condition.lock()
        while !ended {
            condition.wait()
        }
        condition.unlock()
    }

    // MARK: - Plumbing

    private enum Outcome {
        case element(Element)
        case end(Failure?)

        func element() throws(Failure) -> Element? {
            switch self {
            case .element(let element): return element
            case .end(let failure?): throw failure
            case .end(nil): return nil
            }
        }
    }

    /// Takes the first waiting element (freeing its room) or reports the end; under the lock.
    private func takeNext() -> Outcome {
        guard !waiting.isEmpty else { return .end(failure) }
        let element = waiting.removeFirst().element
        condition.broadcast()
        if let producer = suspendedProducer {
            suspendedProducer = nil
            producer.resume()
        }
        return .element(element)
    }

    private func takeSuspendedConsumer() -> CheckedContinuation<Void, Never>? {
        defer { suspendedConsumer = nil }
        return suspendedConsumer
    }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }
}
