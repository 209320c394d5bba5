import COutpostZlib
import Foundation

/// gzip (RFC 1952) on the system's zlib, for bodies over the compression threshold: the client's
/// requests and the responses a platform's URL loading left compressed, and the reference server's both ways.
public enum Gzip {
    /// What inflating a body gave.
    public enum Inflation: Sendable, Hashable {
        /// The whole stream, within the limit.
        case complete(Data)
        /// Not a gzip or zlib stream, or truncated.
        case corrupt
        /// It would inflate past the limit: a small body must not become gigabytes in memory.
        case exceedsLimit
    }

    /// Whether `data` starts with the gzip magic bytes; JSON never does.
    public static func isCompressed(_ data: Data) -> Bool {
        data.count >= 2 && data[data.startIndex] == 0x1f && data[data.startIndex + 1] == 0x8b
    }

    /// `data` as a gzip member.
    public static func compress(_ data: Data) -> Data {
        // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of zlib's own.
        deflateWhole(data, windowBits: 15 + 16, memoryLevel: 8)
    }

    /// `data` deflated in one call, with `dictionary` preset when there is one (raw streams only): the
    /// one deflate of `compress` and `PrimedDeflate`.
    static func deflateWhole(_ data: Data, windowBits: Int32, memoryLevel: Int32, dictionary: Data? = nil) -> Data {
        var stream = z_stream()
        let started = deflateInit2_(
            &stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, windowBits, memoryLevel, Z_DEFAULT_STRATEGY, zlibVersion(),
            Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib deflateInit2 failed: \(started)")
        defer { deflateEnd(&stream) }
        if let dictionary, !dictionary.isEmpty {
            let set = dictionary.withUnsafeBytes { bytes in
                deflateSetDictionary(&stream, bytes.bindMemory(to: Bytef.self).baseAddress, uInt(bytes.count))
            }
            precondition(set == Z_OK, "zlib deflateSetDictionary failed: \(set)")
        }
        var output = Data(count: Int(deflateBound(&stream, uLong(data.count))))
        let written = data.withUnsafeBytes { (input: UnsafeRawBufferPointer) -> Int in
            output.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Int in
                stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = buffer.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(buffer.count)
                let status = deflate(&stream, Z_FINISH)
                // deflateBound guarantees room for the whole output in one call.
                precondition(status == Z_STREAM_END, "zlib deflate failed: \(status)")
                return Int(stream.total_out)
            }
        }
        output.count = written
        return output
    }

    /// The bytes of a gzip (or zlib) stream; nil when `data` is not one or is truncated.
    static func decompress(_ data: Data) -> Data? {
        if case .complete(let plain) = inflate(data, limit: .max) { return plain }
        return nil
    }

    /// The bytes of a gzip (or zlib) stream, every member of it, stopping as soon as they pass `limit`.
    public static func inflate(_ data: Data, limit: Int) -> Inflation {
        // windowBits 15 + 32 detects gzip or zlib headers automatically.
        inflate(data, windowBits: 15 + 32, dictionary: nil, limit: limit)
    }

    /// The one inflate loop: of `inflate`, and of `PrimedDeflate` (a raw stream, negative `windowBits`,
    /// whose `dictionary` is preset before the first byte).
    static func inflate(_ data: Data, windowBits: Int32, dictionary: Data?, limit: Int) -> Inflation {
        var stream = z_stream()
        guard inflateInit2_(&stream, windowBits, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .corrupt
        }
        defer { inflateEnd(&stream) }
        if let dictionary, !dictionary.isEmpty {
            let set = dictionary.withUnsafeBytes { bytes in
                inflateSetDictionary(&stream, bytes.bindMemory(to: Bytef.self).baseAddress, uInt(bytes.count))
            }
            guard set == Z_OK else { return .corrupt }
        }
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: limit < 64 * 1024 ? max(limit, 0) + 1 : 64 * 1024)
        var tooLarge = false
        let finished = data.withUnsafeBytes { (input: UnsafeRawBufferPointer) -> Bool in
            guard let base = input.bindMemory(to: Bytef.self).baseAddress else { return false }
            stream.next_in = UnsafeMutablePointer(mutating: base)
            stream.avail_in = uInt(input.count)
            while true {
                let status = buffer.withUnsafeMutableBufferPointer { chunk -> Int32 in
                    stream.next_out = chunk.baseAddress
                    stream.avail_out = uInt(chunk.count)
                    return COutpostZlib.inflate(&stream, Z_NO_FLUSH)
                }
                output.append(contentsOf: buffer[0..<(buffer.count - Int(stream.avail_out))])
                if output.count > limit {
                    tooLarge = true
                    return false
                }
                switch status {
                case Z_STREAM_END where stream.avail_in > 0 && windowBits > 0:
                    // Another gzip member follows (RFC 1952: a body is its members one after another),
                    // read as `GunzipStream` reads it; bytes that are no member are corrupt. Only the
                    // first was read, and whatever followed it dropped (attack 81).
                    guard inflateReset(&stream) == Z_OK else { return false }
                case Z_STREAM_END: return stream.avail_in == 0
                case Z_OK where stream.avail_in > 0 || stream.avail_out == 0: continue
                default: return false
                }
            }
        }
        if tooLarge { return .exceedsLimit }
        return finished ? .complete(output) : .corrupt
    }
}

/// Raw deflate primed with a dictionary: a small record's JSON compressed against a similar one's,
/// whose field names and shared values it then names in a few bytes each (the device's audit entries,
/// issue 41: an issue's fields fell from about 250 bytes to about 40). No header or trailer: the
/// holder keeps what the stream is and which dictionary it needs.
public enum PrimedDeflate {
    /// A 1 KiB window: the dictionary and the data are a record's fields, a few hundred bytes each, and
    /// a small window and memory level keep each call's zlib state near 20 KB instead of 260 KB.
    static let windowBits: Int32 = 10
    static let memoryLevel: Int32 = 5

    /// `data` deflated against `dictionary` (its last KiB counts).
    public static func compress(_ data: Data, dictionary: Data) -> Data {
        Gzip.deflateWhole(data, windowBits: -windowBits, memoryLevel: memoryLevel, dictionary: dictionary)
    }

    /// What `compress` was given, when `dictionary` is the one it was given; stops past `limit` bytes.
    /// A stream with bytes after its end, or one the dictionary does not fit, is corrupt.
    public static func inflate(_ data: Data, dictionary: Data, limit: Int) -> Gzip.Inflation {
        Gzip.inflate(data, windowBits: -windowBits, dictionary: dictionary, limit: limit)
    }
}

/// A gzip member written a piece at a time, for a body sent as it is made (a pre-sync bundle, which
/// is never whole in memory). One stream per body; not shared between tasks.
///
/// Past its first half MiB it never shrinks its input more than `maximumRatio` times, at any point: a device
/// refuses a download that inflates more than 200 times its bytes so far (`maximumInflationRatio`, a
/// gzip bomb's guard), and a project holding one member's 1 MiB text of a repeated letter, which deflate
/// shrinks a thousand times, made its bundle one no device could pre-sync (attack 118, F1). Where the
/// input shrinks further, it goes stored (level 0) until the whole is back under half the ratio.
public final class GzipStream {
    /// The most times the input so far may be the output so far, past the first half MiB: half a device's
    /// default guard, so a piece compressed between two checks cannot take the whole past it.
    public static let maximumRatio: UInt = 100
    /// Pieces are deflated this much at a time, the ratio checked between: a 1 MiB text in one call
    /// went past any ratio before it could be checked.
    static let slice = 64 * 1024
    /// zlib's state points back at its `z_stream`, so the stream lives at one address for its life.
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var finished = false
    /// Whether pieces now go stored: the input shrank past `maximumRatio`.
    private var storing = false
    /// Whether it keeps `maximumRatio`; without, it shrinks what it can, to measure how far bytes go.
    private let keepsRatio: Bool
    /// Where zlib writes, reused by every piece.
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// Starts a member at zlib's default level (6): a bundle's JSON shrinks about 20 times for about
    /// 6 ms of CPU per megabyte. With `keepingDevicesRatio` false, it shrinks everything as far as it
    /// goes, never stored for its ratio: to measure how far bytes shrink (the zip exporter's choice of
    /// an entry's method), not for a body a device reads.
    public init(keepingDevicesRatio: Bool = true) {
        keepsRatio = keepingDevicesRatio
        stream.initialize(to: z_stream())
        // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of zlib's own.
        let started = deflateInit2_(
            stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(),
            Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib deflateInit2 failed: \(started)")
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// The compressed bytes `bytes` gave so far; zlib holds back what it has not finished with, so
    /// this is often empty for a small piece.
    public func compress(_ bytes: [UInt8]) -> [UInt8] {
        precondition(!finished, "GzipStream.compress after finish")
        guard bytes.count > Self.slice else {
            var output: [UInt8] = []
            keepRatio(taking: bytes.count, into: &output)
            return output + run(bytes, flush: Z_NO_FLUSH)
        }
        var output: [UInt8] = []
        for start in stride(from: 0, to: bytes.count, by: Self.slice) {
            let end = min(start + Self.slice, bytes.count)
            keepRatio(taking: end - start, into: &output)
            output += run(Array(bytes[start..<end]), flush: Z_NO_FLUSH)
        }
        return output
    }

    /// Before `count` more bytes go in: switches to stored blocks when they could take the input past
    /// `maximumRatio` times the output so far (beyond its first half MiB: zlib holds output back, so the
    /// whole first MiB a device allows could otherwise go out as a few hundred bytes), and back to the
    /// default level once the input is under half that ratio.
    private func keepRatio(taking count: Int, into output: inout [UInt8]) {
        guard keepsRatio else { return }
        let input = UInt(stream.pointee.total_in) + UInt(count), written = UInt(stream.pointee.total_out)
        let shrinksTooFar = input > max(1 << 19, Self.maximumRatio * written)
        let backUnder = input <= Self.maximumRatio / 2 * written
        guard storing ? backUnder : shrinksTooFar else { return }
        storing.toggle()
        // zlib deflates what it holds at the old level first, and asks for more room until it is done.
        while true {
            let status = buffer.withUnsafeMutableBufferPointer { chunk -> Int32 in
                stream.pointee.next_out = chunk.baseAddress
                stream.pointee.avail_out = uInt(chunk.count)
                return deflateParams(stream, storing ? 0 : Z_DEFAULT_COMPRESSION, Z_DEFAULT_STRATEGY)
            }
            output.append(contentsOf: buffer[0..<(buffer.count - Int(stream.pointee.avail_out))])
            stream.pointee.next_out = nil
            if status == Z_OK { return }
            precondition(status == Z_BUF_ERROR, "zlib deflateParams failed: \(status)")
        }
    }

    /// The rest of the member, trailer included; the stream takes nothing after it.
    public func finish() -> [UInt8] {
        precondition(!finished, "GzipStream.finish twice")
        finished = true
        return run([], flush: Z_FINISH)
    }

    private func run(_ bytes: [UInt8], flush: Int32) -> [UInt8] {
        var output: [UInt8] = []
        bytes.withUnsafeBufferPointer { input in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.pointee.avail_in = uInt(input.count)
            while true {
                let status = buffer.withUnsafeMutableBufferPointer { chunk -> Int32 in
                    stream.pointee.next_out = chunk.baseAddress
                    stream.pointee.avail_out = uInt(chunk.count)
                    return deflate(stream, flush)
                }
                output.append(contentsOf: buffer[0..<(buffer.count - Int(stream.pointee.avail_out))])
                // zlib has all it needs here (a fresh buffer each turn), so any other status is a bug;
                // Z_BUF_ERROR only says an empty piece gave nothing to do.
                let allowed = status == Z_OK || status == Z_STREAM_END || (status == Z_BUF_ERROR && flush != Z_FINISH)
                precondition(allowed, "zlib deflate failed: \(status)")
                // Done when zlib left room in the buffer (it took all the input) or ended the member.
                if status == Z_STREAM_END || (flush != Z_FINISH && stream.pointee.avail_out > 0) { break }
            }
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        return output
    }
}

/// A gzip body inflated a piece at a time while it arrives, for a download written to disk as it
/// comes (a pre-sync bundle). Why not the HTTP client's own inflation: it hands over only inflated
/// bytes, and a download earns its time by the bytes that crossed the wire; earned by inflated
/// bytes, a server dripping a few hundred bytes a second that inflate a thousandfold held a pre-sync
/// for hours (attack 80). One stream per body; not shared between tasks.
public final class GunzipStream {
    /// Why a body could not be inflated.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// What went wrong.
        public enum Kind: Sendable, Hashable {
            /// Not a gzip stream, or its trailer does not match what it inflated to.
            case corrupt
            /// The body ended inside a gzip member.
            case truncated
            /// It inflated past the limit.
            case exceedsLimit
        }

        /// What went wrong.
        public var kind: Kind
        /// zlib's status code, when zlib refused the stream.
        public var zlibStatus: Int32?
        /// The inflated bytes written before it went wrong.
        public var inflatedBytes: Int64

        public var description: String {
            switch kind {
            case .corrupt: "the gzip body is corrupt (zlib \(zlibStatus ?? 0)) after \(inflatedBytes) inflated bytes"
            case .truncated: "the answer ended inside its gzip body, after \(inflatedBytes) inflated bytes"
            case .exceedsLimit: "the gzip body inflates past its limit"
            }
        }
    }

    /// zlib's state points back at its `z_stream`, so the stream lives at one address for its life.
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    /// Where zlib writes, handed to the caller a piece at a time: memory stays at this buffer whatever
    /// a piece inflates to.
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    private let limit: Int64
    /// Inflated bytes so far.
    public private(set) var inflatedCount: Int64 = 0
    /// Whether the last member has ended (gzip allows several members one after another).
    private var atMemberEnd = false

    /// A stream refusing to inflate past `limit` bytes.
    public init(limit: Int64) {
        self.limit = limit
        stream.initialize(to: z_stream())
        // windowBits 15 + 16: a gzip header and trailer, whose CRC zlib checks.
        let started = inflateInit2_(stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib inflateInit2 failed: \(started)")
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Inflates `bytes`, the next piece of the body, handing what they inflate to to `write` in pieces
    /// of at most 64 KiB. Throws `Failure` (or what `write` throws).
    public func inflate(_ bytes: UnsafeRawBufferPointer, into write: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard let base = bytes.bindMemory(to: Bytef.self).baseAddress, !bytes.isEmpty else { return }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: base)
        stream.pointee.avail_in = uInt(bytes.count)
        defer { stream.pointee.next_in = nil }
        while true {
            if atMemberEnd {
                guard stream.pointee.avail_in > 0 else { return }
                // Another member follows: zlib starts it afresh, header and all.
                let reset = inflateReset(stream)
                guard reset == Z_OK else { throw Failure(kind: .corrupt, zlibStatus: reset, inflatedBytes: inflatedCount) }
                atMemberEnd = false
            }
            let status = buffer.withUnsafeMutableBufferPointer { chunk -> Int32 in
                stream.pointee.next_out = chunk.baseAddress
                stream.pointee.avail_out = uInt(chunk.count)
                return COutpostZlib.inflate(stream, Z_NO_FLUSH)
            }
            stream.pointee.next_out = nil
            let produced = buffer.count - Int(stream.pointee.avail_out)
            if produced > 0 {
                inflatedCount += Int64(produced)
                guard inflatedCount <= limit else {
                    throw Failure(kind: .exceedsLimit, zlibStatus: nil, inflatedBytes: inflatedCount)
                }
                try buffer.withUnsafeBytes { try write(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) }
            }
            switch status {
            case Z_STREAM_END:
                atMemberEnd = true
            case Z_OK:
                // Done with this piece once zlib took it all and had room to spare (nothing held back).
                if stream.pointee.avail_in == 0, stream.pointee.avail_out > 0 { return }
            case Z_BUF_ERROR:
                // No progress possible without more input: the piece is used up.
                return
            default:
                throw Failure(kind: .corrupt, zlibStatus: status, inflatedBytes: inflatedCount)
            }
        }
    }

    /// Checks the body ended where a member did; throws `Failure` (`truncated`) if not.
    public func finish() throws {
        guard atMemberEnd else { throw Failure(kind: .truncated, zlibStatus: nil, inflatedBytes: inflatedCount) }
    }
}
