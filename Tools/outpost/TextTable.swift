import OutpostSchema

/// Left-aligned columns for terminal output, padded by the widest cell of each column.
struct TextTable {
    let headers: [String]
    let rows: [[String]]

    var rendered: String {
        // Cells hold text no rule checked (a member's name, synced from any owner's device): each stays
        // on its line and in its order (`OneLineText`).
        let rows = rows.map { $0.map(OneLineText.escaping) }
        let widths = headers.indices.map { column in
            ([headers] + rows).map { $0[column].count }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { cell, width in cell.padding(toLength: width) }
                .joined(separator: "  ").trimmingTrailingSpaces()
        }
        let rule = widths.map { String(repeating: "-", count: $0) }
        return ([line(headers), line(rule)] + rows.map(line)).joined(separator: "\n")
    }
}

extension String {
    fileprivate func padding(toLength width: Int) -> String {
        self + String(repeating: " ", count: max(0, width - count))
    }

    fileprivate func trimmingTrailingSpaces() -> String {
        var result = self
        while result.last == " " { result.removeLast() }
        return result
    }
}
