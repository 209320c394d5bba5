import CLibDeflate
import Foundation
import Synchronization

/// gzip of a whole JSON answer through libdeflate: a pull page (some 3 MB of JSON at 5,000 records)
/// is the one that counts.
///
/// Why not zlib (`Gzip.compress`, which answered before): on a 5,000-record pull page, level 6 of
/// libdeflate took 18 ms and gave 160 KB where zlib's level 6 took 32 ms for 170 KB (one C driver over
/// the same page, same host), and zlib was 12% of a loopback pull's CPU, server and device together
/// (`perf`, `outpost-bench server`). Fewer bytes for the crews' cellular plans, and less CPU. libdeflate
/// compresses whole buffers only: a bundle, compressed batch by batch as one gzip member while it
/// streams, keeps zlib (`GzipStream`).
enum PageCompression {
    /// libdeflate's default level, as zlib's default was.
    static let level: Int32 = 6

    /// Compressors are not thread-safe and each holds a few hundred KB of tables: a few are kept for
    /// the next answers instead of being made and freed for each.
    private static let idle = Mutex<[Compressor]>([])
    private static let keptIdle = 4

    /// A libdeflate compressor. Sendable by hand: it is used by one answer at a time, which takes it
    /// out of `idle` and puts it back when done.
    private struct Compressor: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    /// `bytes` as one gzip member.
    static func gzip(_ bytes: [UInt8]) -> Data {
        let taken = idle.withLock { $0.popLast() } ?? libdeflate_alloc_compressor(level).map(Compressor.init)
        guard let taken else { preconditionFailure("libdeflate could not allocate a compressor") }
        let compressor = taken.pointer
        defer {
            let kept = idle.withLock { idle in
                guard idle.count < keptIdle else { return false }
                idle.append(taken)
                return true
            }
            if !kept { libdeflate_free_compressor(compressor) }
        }
        let bound = libdeflate_gzip_compress_bound(compressor, bytes.count)
        var output = Data(count: bound)
        let written = bytes.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { buffer in
                libdeflate_gzip_compress(compressor, input.baseAddress, input.count, buffer.baseAddress, buffer.count)
            }
        }
        // The bound is libdeflate's own for this input: 0 (no room) cannot happen.
        precondition(written > 0, "libdeflate_gzip_compress wrote nothing into its own bound")
        output.count = written
        return output
    }
}
