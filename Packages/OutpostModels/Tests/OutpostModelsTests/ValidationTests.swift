@testable import OutpostModels
@testable import OutpostSchema
import Foundation
import OutpostFieldServiceTesting
import Testing

@Suite(.fieldService) struct ValidationTests {
    let project = Samples.project
    let member = Samples.member

    @Test func validSamplesPass() throws {
        for sample in Samples.all(full: true) + Samples.all(full: false) {
            #expect(sample.validationErrors.isEmpty, "\(sample.validationErrors)")
        }
    }

    @Test func emptyRequiredTextIsRefused() {
        let issue = Issue(projectID: project, title: "  \n")
        #expect(throws: ModelError.self) { try issue.validate() }
        let error = issue.validationErrors.first
        #expect(error?.code == .emptyRequiredField)
        #expect(error?.field == "title")
        #expect(error?.id == issue.id)
        #expect(error?.description.contains("field 'title': must not be empty") == true)
    }

    @Test func optionalTextMayBeEmpty() {
        #expect(Issue(projectID: project, title: "Leak", details: "").validationErrors.isEmpty)
    }

    @Test func negativeMoneyCountsAndQuantitiesAreRefused() {
        let cases: [(any Syncable, String)] = [
            (Fee(projectID: project, name: "Permit", amountCents: -1), "amountCents"),
            (ScopeItem(scopeID: UUID(), name: "Tile", quantity: 2, unit: "box", unitPriceCents: -500), "unitPriceCents"),
            (Measure(measureSheetID: UUID(), label: "Wall", quantity: -0.5, unit: "ft"), "quantity"),
            (Discount(projectID: project, name: "Promo", kind: .fixedAmount, value: -100), "value"),
            (DailyLog(projectID: project, authorID: member, day: "2026-01-02", crewSize: -2), "crewSize"),
        ]
        for (model, field) in cases {
            let error = model.validationErrors.first
            #expect(error?.code == .negativeAmount, "\(field)")
            #expect(error?.field == field)
        }
    }

    @Test func unknownEnumValueIsRefusedWhenConverting() {
        var record = Issue(projectID: project, title: "Leak").record
        record["status"] = .text("wontfix")
        #expect(record.validationErrors.map(\.code) == [.unknownEnumValue])
        do {
            _ = try Issue(record: record)
            Issue.record("an unknown status converted")
        } catch {
            #expect(error.code == .unknownEnumValue)
            #expect(error.field == "status")
            #expect(error.message.contains("'wontfix' is not one of open, inProgress, resolved, closed"))
        }
    }

    @Test func missingUnknownAndMistypedFieldsAreRefused() {
        var record = Fee(projectID: project, name: "Permit", amountCents: 100).record
        record.fields["amountCents"] = nil
        record["name"] = .integer(3)
        record["colour"] = .text("red")
        let errors = record.validationErrors
        #expect(errors.map(\.code) == [.unknownField, .typeMismatch, .missingField])
        #expect(errors.map(\.field) == ["colour", "name", "amountCents"])
        #expect(throws: ModelError.self) { try Fee(record: record) }
    }

    @Test func aRecordOfAnotherEntityIsRefused() {
        let record = Fee(projectID: project, name: "Permit", amountCents: 100).record
        #expect(throws: ModelError.self) { try Discount(record: record) }
        do { _ = try Discount(record: record) } catch { #expect(error.code == .wrongEntity) }
    }

    @Test func rangesAreChecked() {
        let northOfPole = Issue(projectID: project, title: "Leak", latitude: 91, longitude: 0)
        #expect(northOfPole.validationErrors.map(\.code) == [.outOfRange])
        let offMap = Issue(projectID: project, title: "Leak", latitude: 0, longitude: -180.5)
        #expect(offMap.validationErrors.first?.field == "longitude")
        let tooGenerous = Discount(projectID: project, name: "All free", kind: .percentage, value: 10_001)
        #expect(tooGenerous.validationErrors.map(\.code) == [.outOfRange])
        #expect(Discount(projectID: project, name: "Big", kind: .fixedAmount, value: 10_001).validationErrors.isEmpty)
        let noTerm = FinanceOption(projectID: project, lender: "Acme", termMonths: 0, aprBasisPoints: 0)
        #expect(noTerm.validationErrors.map(\.code) == [.outOfRange])
        let notANumber = Measure(measureSheetID: UUID(), label: "Wall", quantity: .nan, unit: "ft")
        #expect(notANumber.validationErrors.map(\.code) == [.outOfRange])
        var hugeThumbnail = Samples.all(full: true).compactMap { $0 as? MediaAttachment }[0]
        hugeThumbnail.thumbnail = Data(count: MediaAttachment.maximumThumbnailBytes + 1)
        #expect(hugeThumbnail.validationErrors.map(\.field) == ["thumbnail"])
    }

    @Test(arguments: ["2026-02-29", "2026-13-01", "2026-1-01", "26-01-01", "2026-04-31", "yesterday", "2026-01-0１"])
    func malformedDaysAreRefused(day: String) {
        let log = DailyLog(projectID: project, authorID: member, day: day)
        #expect(log.validationErrors.map(\.code) == [.invalidFormat])
    }

    @Test(arguments: ["2024-02-29", "2000-02-29", "2026-12-31"])
    func realDaysPass(day: String) {
        #expect(DailyLog(projectID: project, authorID: member, day: day).validationErrors.isEmpty)
    }

    @Test func digestsMustBeLowercaseHexOfSHA256Length() {
        for digest in [String(repeating: "A", count: 64), String(repeating: "a", count: 63), "sha256:abc"] {
            let document = ReferenceDocument(
                projectID: project, title: "Plan", kind: .drawing, fileName: "a.pdf", byteSize: 1, sha256: digest)
            #expect(document.validationErrors.map(\.code) == [.invalidFormat])
        }
    }

    @Test func aClockOutNamesItsClockInAndAClockInNamesNone() {
        let clockIn = TimeEntry(projectID: project, memberID: member, kind: .clockIn, recordedAt: Date())
        #expect(clockIn.validationErrors.isEmpty)
        let unpaired = TimeEntry(projectID: project, memberID: member, kind: .clockOut, recordedAt: Date())
        #expect(unpaired.validationErrors.map(\.code) == [.inconsistentFields])
        let paired = TimeEntry(
            projectID: project, memberID: member, kind: .clockOut, recordedAt: Date(), clockInID: clockIn.id)
        #expect(paired.validationErrors.isEmpty)
        let confused = TimeEntry(
            projectID: project, memberID: member, kind: .clockIn, recordedAt: Date(), clockInID: clockIn.id)
        #expect(confused.validationErrors.map(\.code) == [.inconsistentFields])
        let selfClosing = TimeEntry(
            id: clockIn.id, projectID: project, memberID: member, kind: .clockOut, recordedAt: Date(),
            clockInID: clockIn.id)
        #expect(selfClosing.validationErrors.map(\.code) == [.inconsistentFields])
    }

    @Test func coordinatesComeInPairs() {
        let half = Issue(projectID: project, title: "Leak", latitude: 12)
        #expect(half.validationErrors.map(\.code) == [.inconsistentFields])
    }

    @Test func anAttachmentBelongsToExactlyOneOwner() {
        func photo(issue: UUID?, log: UUID?) -> MediaAttachment {
            MediaAttachment(
                issueID: issue, dailyLogID: log, kind: .photo, fileName: "a.jpg", contentType: "image/jpeg",
                byteSize: 10, sha256: Samples.digest, capturedAt: Date())
        }
        #expect(photo(issue: UUID(), log: nil).validationErrors.isEmpty)
        #expect(photo(issue: nil, log: UUID()).validationErrors.isEmpty)
        #expect(photo(issue: nil, log: nil).validationErrors.map(\.code) == [.inconsistentFields])
        #expect(photo(issue: UUID(), log: UUID()).validationErrors.map(\.code) == [.inconsistentFields])
    }

    @Test(arguments: [("bad\u{01}title", "U+0001"), ("\u{00}", "U+0000"), ("form\u{0C}feed", "U+000C"), ("end\u{1F}", "U+001F"), ("\u{FFFE}", "U+FFFE"), ("x\u{FFFF}", "U+FFFF")])
    func textXMLCannotCarryIsRefused(text: String, named: String) {
        let issue = Issue(projectID: project, title: "Leak", details: text)
        #expect(issue.validationErrors.isEmpty, "a record stored before the rule stays valid as a whole")
        #expect(issue.record.unbundlableValueError(in: ["title"]) == nil, "only the fields named are read")
        let error = issue.record.unbundlableValueError(in: ["title", "details"])
        #expect(error?.code == .forbiddenCharacter)
        #expect(error?.field == "details")
        #expect(error?.description.contains(named) == true, "\(String(describing: error))")
    }

    @Test func textWithTabsNewlinesAndAnyOtherCharacterPasses() {
        let text = "tab\t, line\n, return\r, DEL \u{7F}, C1 \u{85}, \u{FFFD}, \u{EFFF} é 🏗️ 中"
        #expect(Issue(projectID: project, title: "Leak", details: text).record.unbundlableValueError(in: ["details"]) == nil)
    }

    @Test func everyRuleBrokenIsReportedNotOnlyTheFirst() {
        let fee = Fee(projectID: project, name: "", amountCents: -5)
        #expect(fee.validationErrors.map(\.code) == [.emptyRequiredField, .negativeAmount])
    }
}

@Suite(.fieldService) struct BlankTextTests {
    /// The fast blank check agrees with Foundation's trimming on ASCII and Unicode spaces alike.
    @Test(arguments: ["", " ", "\t\n\r", "\u{0B}\u{0C}", "\u{00A0}", " \u{2028} ", "\u{3000}", "a", " a ", "é", "\u{00A0}x", "  \u{200B}"])
    func blankMeansWhatTrimmingSays(text: String) {
        #expect(text.isBlank == text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(text.unicodeScalars.map(\.value))")
    }
}
