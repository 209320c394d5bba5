/// Field names (`projectID`) to column names (`project_id`): the one mapping between the catalog and SQL.
enum ColumnName {
    static func forField(_ field: String) -> String {
        let characters = Array(field)
        var column = ""
        for (offset, character) in characters.enumerated() {
            if character.isUppercase, offset > 0 {
                let previous = characters[offset - 1]
                let next = offset + 1 < characters.count ? characters[offset + 1] : nil
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && next?.isLowercase == true) {
                    column.append("_")
                }
            }
            column.append(contentsOf: character.lowercased())
        }
        return column
    }
}
