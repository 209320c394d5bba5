import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostStore

/// A one-line progress bar on standard error, redrawn in place; only drawn on a terminal.
enum BundleProgressBar {
    static func draw(_ progress: ImportProgress) {
        let width = 30
        let fraction = progress.totalBytes > 0 ? min(1, Double(progress.bytesRead) / Double(progress.totalBytes)) : 0
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let line = "\r\(bar) \(Int(fraction * 100))%  \(progress.records) records  \(progress.bytesRead / 1_048_576) MiB"
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func clear() {
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}
