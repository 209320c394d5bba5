import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore

/// A small, realistic project with every entity: the content of `schemas/examples/` and of most tests.
/// Ids and instants are fixed, so exports are byte-for-byte stable.
enum SampleProject {
    static func id(_ n: Int) -> UUID { UUID(uuidString: String(format: "0b5e55ed-0000-4000-8000-%012d", n))! }
    static let base = Date(timeIntervalSince1970: 1_795_000_000.125)
    static let project = id(2)
    static let foreman = id(10)
    static let estimator = id(11)
    static let thumbnail = Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00, 0x01])
    static let drawingDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

    static func sync(_ minutes: Double, version: Int64 = 1, deleted: Bool = false) -> SyncMetadata {
        SyncMetadata(
            serverID: "srv-\(Int(minutes))", version: version, createdAt: base,
            updatedAt: base.addingTimeInterval(minutes * 60), deletedAt: deleted ? base.addingTimeInterval(minutes * 60) : nil,
            syncStatus: .synced)
    }

    static var records: [EntityRecord] {
        let models: [any Syncable] = [
            Opportunity(id: id(1), sync: sync(1), name: "Kitchen remodel", customerName: "Zoë Müller",
                address: "12 Elm St, Springfield", stage: .won, estimatedValueCents: 4_250_000),
            Project(id: project, sync: sync(2), opportunityID: id(1), name: "Müller kitchen", number: "J-2026-114",
                address: "12 Elm St, Springfield", status: .active, startDay: "2026-12-01"),
            Member(id: foreman, sync: sync(3), projectID: project, userID: id(900), name: "Ana Lima",
                email: "ana@example.com", role: .foreman),
            Member(id: estimator, sync: sync(3), projectID: project, userID: id(901), name: "Bo Chen",
                email: "bo@example.com", role: .estimator),
            Scope(id: id(20), sync: sync(4), projectID: project, name: "Cabinets", notes: "Shaker, white", sortOrder: 1),
            MeasureSheet(id: id(21), sync: sync(5), scopeID: id(20), name: "Site visit 1", notes: "Laser measured"),
            Measure(id: id(22), sync: sync(6), measureSheetID: id(21), label: "North wall", quantity: 12.75, unit: "ft"),
            Measure(id: id(23), sync: sync(6), measureSheetID: id(21), label: "East wall", quantity: 9.5, unit: "ft",
                sortOrder: 1),
            ScopeItem(id: id(24), sync: sync(7), scopeID: id(20), measureID: id(22), name: "Base cabinet 36\"",
                quantity: 4, unit: "ea", unitPriceCents: 48_900, sortOrder: 1),
            ScopeItem(id: id(25), sync: sync(7), scopeID: id(20), name: "Crown molding", quantity: 22.25, unit: "ft",
                unitPriceCents: 1_250, sortOrder: 2),
            Discount(id: id(30), sync: sync(8), projectID: project, name: "Winter promo", kind: .percentage, value: 1_000),
            FinanceOption(id: id(31), sync: sync(8), projectID: project, lender: "Acme Credit", termMonths: 60,
                aprBasisPoints: 799, downPaymentCents: 100_000),
            Fee(id: id(32), sync: sync(8), projectID: project, name: "Permit", amountCents: 35_000, isTaxable: false),
            Asset(id: id(40), sync: sync(9), projectID: project, name: "Water heater", qrCode: "OUTPOST:ASSET:77",
                category: "Plumbing", location: "Basement"),
            ReferenceDocument(id: id(41), sync: sync(9), projectID: project, title: "A-101 Floor plan", kind: .drawing,
                revision: "C", fileName: "A-101.pdf", byteSize: 4, sha256: drawingDigest),
            ReferenceDocument(id: id(42), sync: sync(9, version: 3), projectID: project, title: "RFI 7: vent routing",
                kind: .rfi, fileName: "RFI-007.pdf", byteSize: 4, sha256: drawingDigest),
            Issue(id: id(50), sync: sync(10, version: 4), projectID: project, title: "Cracked tile near sink",
                details: "Hairline crack, 30 cm.\r\nCheck the subfloor <first> & photograph it.", status: .inProgress,
                priority: .high, assigneeID: foreman, latitude: 47.6062, longitude: -122.3321, assetID: id(40),
                modelElementID: "IFC-0042"),
            Issue(id: id(51), sync: sync(11), projectID: project, title: "Outlet missing cover", priority: .low),
            Comment(id: id(60), sync: sync(13), issueID: id(50), authorID: estimator, body: "Ordered a replacement tile."),
            Comment(id: id(61), sync: sync(14), issueID: id(50), authorID: foreman, body: "  Subfloor is dry 👍  "),
            DailyLog(id: id(70), sync: sync(15), projectID: project, authorID: foreman, day: "2026-11-22",
                notes: "Demo done; cabinets arrive Monday.", weather: "Overcast, 7 °C", crew: "Ana, Bo, Chidi",
                crewSize: 3, hours: 24.5),
            TimeEntry(id: id(80), sync: sync(16), projectID: project, memberID: foreman, kind: .clockIn,
                recordedAt: base.addingTimeInterval(3600), latitude: 47.6062, longitude: -122.3321, note: "Gate code 4411"),
            TimeEntry(id: id(81), sync: sync(17), projectID: project, memberID: foreman, kind: .clockOut,
                recordedAt: base.addingTimeInterval(9 * 3600), clockInID: id(80)),
            MediaAttachment(id: id(90), sync: sync(18), issueID: id(50), kind: .photo, fileName: "IMG_0042.jpg",
                contentType: "image/jpeg", byteSize: 4_194_304, sha256: drawingDigest, thumbnail: thumbnail,
                capturedAt: base.addingTimeInterval(7200)),
            MediaAttachment(id: id(91), sync: sync(19), dailyLogID: id(70), kind: .voiceNote, fileName: "note-1.m4a",
                contentType: "audio/mp4", byteSize: 81_920, sha256: drawingDigest, capturedAt: base.addingTimeInterval(7300),
                durationSeconds: 12.5),
        ]
        return models.map(\.record)
    }
}
