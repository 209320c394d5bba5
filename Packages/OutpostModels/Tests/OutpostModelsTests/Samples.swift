import Foundation
import OutpostModels
import OutpostSchema

/// Realistic values of every entity, once with every optional field set and once with none.
enum Samples {
    static let created = Date(timeIntervalSince1970: 1_795_000_000.123)
    static let project = UUID(uuidString: "6C1D2A4E-0000-4000-8000-000000000001")!
    static let member = UUID(uuidString: "6C1D2A4E-0000-4000-8000-000000000002")!
    static let digest = String(repeating: "ab", count: 32)

    static func sync(deleted: Bool) -> SyncMetadata {
        SyncMetadata(
            serverID: deleted ? "4711" : nil, version: deleted ? 7 : 0, createdAt: created,
            updatedAt: created.addingTimeInterval(61.5), deletedAt: deleted ? created.addingTimeInterval(3600) : nil,
            syncStatus: deleted ? .synced : .pending, isOrphaned: deleted)
    }

    /// One value of every entity type; `full` sets every optional field.
    static func all(full: Bool) -> [any Syncable] {
        let sync = sync(deleted: full)
        let clockIn = TimeEntry(
            sync: sync, projectID: project, memberID: member, kind: .clockIn, recordedAt: created,
            latitude: full ? 47.6062 : nil, longitude: full ? -122.3321 : nil, note: full ? "Gate code 4411 🔑" : "")
        return [
            clockIn,
            TimeEntry(
                sync: sync, projectID: project, memberID: member, kind: .clockOut,
                recordedAt: created.addingTimeInterval(8 * 3600), clockInID: clockIn.id),
            DailyLog(
                sync: sync, projectID: project, authorID: member, day: "2026-11-22",
                notes: "Poured footings; inspector signed off.", weather: "Overcast, 7 °C",
                crew: "Ana, Bo, Chidi", crewSize: 3, hours: 24.5),
            Opportunity(
                sync: sync, name: "Kitchen remodel", customerName: "Zoë Müller", address: "12 Elm St",
                stage: .proposal, estimatedValueCents: 4_250_000),
            Project(
                sync: sync, opportunityID: full ? UUID() : nil, name: "Müller kitchen", number: full ? "J-2026-114" : nil,
                address: "12 Elm St", status: .active, startDay: full ? "2026-12-01" : nil),
            Scope(sync: sync, projectID: project, name: "Cabinets", notes: "Shaker, white", sortOrder: 2),
            MeasureSheet(sync: sync, scopeID: UUID(), name: "Site visit 1", notes: "Laser measured"),
            Measure(sync: sync, measureSheetID: UUID(), label: "North wall", quantity: 12.75, unit: "ft"),
            ScopeItem(
                sync: sync, scopeID: UUID(), measureID: full ? UUID() : nil, name: "Base cabinet 36\"",
                quantity: 4, unit: "ea", unitPriceCents: 48_900, sortOrder: 1),
            Discount(sync: sync, projectID: project, name: "Winter promo", kind: .percentage, value: 1_000),
            FinanceOption(
                sync: sync, projectID: project, lender: "Acme Credit", termMonths: 60, aprBasisPoints: 799,
                downPaymentCents: 100_000),
            Fee(sync: sync, projectID: project, name: "Permit", amountCents: 35_000, isTaxable: full),
            Issue(
                sync: sync, projectID: project, title: "Cracked tile near sink", details: "Hairline, 30 cm",
                status: .inProgress, priority: .high, assigneeID: full ? member : nil,
                latitude: full ? -33.8688 : nil, longitude: full ? 151.2093 : nil, assetID: full ? UUID() : nil,
                modelElementID: full ? "IFC-0042" : nil),
            Comment(sync: sync, issueID: UUID(), authorID: member, body: "Ordered a replacement."),
            Asset(
                sync: sync, projectID: project, name: "Water heater", qrCode: "OUTPOST:ASSET:77",
                category: "Plumbing", location: "Basement"),
            ReferenceDocument(
                sync: sync, projectID: project, title: "A-101 Floor plan", kind: .drawing, revision: "C",
                fileName: "A-101.pdf", byteSize: 2_400_000, sha256: digest),
            MediaAttachment(
                sync: sync, issueID: full ? UUID() : nil, dailyLogID: full ? nil : UUID(),
                kind: full ? .voiceNote : .photo, fileName: "IMG_0042.jpg", contentType: "image/jpeg",
                byteSize: 4_194_304, sha256: digest, thumbnail: full ? Data([0xFF, 0xD8, 0xFF, 0xE0]) : nil,
                capturedAt: created, durationSeconds: full ? 12.5 : nil),
            Member(
                sync: sync, projectID: project, userID: UUID(), name: "Ana Lima", email: "ana@example.com",
                role: .foreman),
        ]
    }
}

