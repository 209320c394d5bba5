/// Which names a zip entry or a manifest's file reference may have: relative paths that stay inside the
/// bundle, so nothing extracted or looked up can land outside it.
enum ArchivePath {
    /// Nil when `path` is safe, otherwise why not.
    static func problem(with path: String) -> String? {
        if path.isEmpty { return "an empty name" }
        if path.utf8.contains(0) { return "a NUL byte in the name" }
        if path.contains("\\") { return "a backslash in the name (only '/' separates folders)" }
        if path.hasPrefix("/") { return "an absolute path" }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        if let first = components.first, first.count == 2, first.hasSuffix(":") { return "a drive letter" }
        if components.contains("..") { return "a '..' component that escapes the bundle" }
        if components.dropLast().contains("") { return "an empty folder name" }
        return nil
    }
}
