import COutpostServerZlib
import Foundation

/// gzip (RFC 1952) on the system's zlib, as `HTTPTransport` uses it: request bodies over 10 KB may
/// arrive compressed, and responses over 10 KB are compressed for clients that accept it.
enum Gzip {
    /// `data` as one gzip member.
    static func compress(_ data: Data) -> Data {
        var stream = z_stream()
        // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
        let started = deflateInit2_(
            &stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(),
            Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib deflateInit2 failed: \(started)")
        defer { deflateEnd(&stream) }
        var output = Data(count: Int(deflateBound(&stream, uLong(data.count))))
        let written = data.withUnsafeBytes { (input: UnsafeRawBufferPointer) -> Int in
            output.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Int in
                stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = buffer.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(buffer.count)
                // deflateBound leaves room for the whole output in one call.
                let status = deflate(&stream, Z_FINISH)
                precondition(status == Z_STREAM_END, "zlib deflate failed: \(status)")
                return Int(stream.total_out)
            }
        }
        output.count = written
        return output
    }

    /// The bytes of a gzip stream: 400 when it is corrupt or truncated, 413 when it would inflate past
    /// `limit` (a small compressed body must not become gigabytes in memory).
    static func decompress(_ data: Data, limit: Int) throws(ServerError) -> Data {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw ServerError(.requestRefused, message: "zlib could not start")
        }
        defer { inflateEnd(&stream) }
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var tooLarge = false
        let finished = data.withUnsafeBytes { (input: UnsafeRawBufferPointer) -> Bool in
            guard let base = input.bindMemory(to: Bytef.self).baseAddress else { return false }
            stream.next_in = UnsafeMutablePointer(mutating: base)
            stream.avail_in = uInt(input.count)
            while true {
                let status = buffer.withUnsafeMutableBufferPointer { chunk -> Int32 in
                    stream.next_out = chunk.baseAddress
                    stream.avail_out = uInt(chunk.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                output.append(contentsOf: buffer[0..<(buffer.count - Int(stream.avail_out))])
                if output.count > limit {
                    tooLarge = true
                    return false
                }
                switch status {
                case Z_STREAM_END: return true
                case Z_OK where stream.avail_in > 0 || stream.avail_out == 0: continue
                default: return false
                }
            }
        }
        if tooLarge {
            throw ServerError(status: 413, .payloadTooLarge, "the body inflates past \(limit) bytes")
        }
        guard finished else { throw ServerError.badRequest("the gzip body is corrupt or truncated") }
        return output
    }
}
