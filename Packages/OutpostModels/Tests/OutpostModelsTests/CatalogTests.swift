@testable import OutpostModels
@testable import OutpostSchema
import Foundation
import OutpostFieldServiceTesting
import OutpostTesting
import Testing

@Suite(.fieldService) struct CatalogTests {
    @Test func everyEntityIsDescribedOnce() {
        #expect(EntityCatalog.all.map(\.type).sorted() == EntityType.allCases.sorted())
        #expect(Set(EntityCatalog.all.map(\.table)).count == EntityCatalog.all.count)
        for description in EntityCatalog.all {
            #expect(description.modelType.entityType == description.type)
            #expect(EntityCatalog.entity(forTable: description.table) == description.type)
        }
    }

    /// Entity names are open values: a name the catalog does not declare is nil (and fails to decode),
    /// never a trap deep inside; a declared one prints and encodes as its name.
    @Test func anEntityNameIsAnOpenValueTheCatalogChecks() throws {
        #expect(EntityType(rawValue: "job") == nil)
        #expect(EntityType(rawValue: "issue") == .issue)
        #expect("\(EntityType.dailyLog)" == "dailyLog" && String(describing: EntityType.scopeItem) == "scopeItem")
        #expect(EntityType.allCases == EntityCatalog.all.map(\.type))
        #expect(String(decoding: try JSONEncoder().encode([EntityType.comment]), as: UTF8.self) == "[\"comment\"]")
        #expect(try JSONDecoder().decode([EntityType].self, from: Data("[\"member\"]".utf8)) == [.member])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([EntityType].self, from: Data("[\"job\"]".utf8)) }
    }

    @Test func parentsComeBeforeChildren() {
        let position = Dictionary(uniqueKeysWithValues: EntityCatalog.all.enumerated().map { ($1.type, $0) })
        for description in EntityCatalog.all {
            for parent in description.parentEntities where parent != description.type {
                #expect(position[parent]! < position[description.type]!, "\(parent) after \(description.type)")
            }
        }
    }

    @Test func parentFieldsAreUUIDFieldsWithMatchingOptionality() {
        for description in EntityCatalog.all {
            for parent in description.parents {
                let field = description.field(named: parent.field)
                #expect(field?.kind == .uuid, "\(description.type).\(parent.field)")
                #expect(field?.isOptional == !parent.isRequired, "\(description.type).\(parent.field)")
            }
        }
    }

    @Test func theEstimateGraphHangsTogether() {
        #expect(EntityType.scope.description.parentEntities == [.project])
        #expect(EntityType.project.description.parentEntities == [.opportunity])
        #expect(EntityType.scopeItem.description.parentEntities == [.scope, .measure])
        #expect(EntityType.measure.description.parentEntities == [.measureSheet])
        #expect(EntityType.measureSheet.description.parentEntities == [.scope])
        #expect(EntityType.timeEntry.description.parentEntities.contains(.timeEntry))
        for money in [EntityType.discount, .financeOption, .fee] {
            #expect(money.description.parentEntities == [.project])
        }
    }

    @Test func defaultPoliciesFollowTheProductBrief() {
        let policy = { (type: EntityType) in type.description.defaultPolicy }
        #expect([policy(.discount), policy(.financeOption), policy(.fee)].allSatisfy { $0 == .serverWins })
        #expect([policy(.dailyLog), policy(.issue), policy(.project), policy(.opportunity)].allSatisfy { $0 == .fieldMerge })
        #expect(policy(.timeEntry) == .clientWins)
        #expect([policy(.comment), policy(.mediaAttachment)].allSatisfy { $0 == .appendOnly })
    }

    @Test func onlyAttachmentsAreMedia() {
        let media = EntityCatalog.all.filter { $0.syncClass == .media }.map(\.type)
        #expect(media == [.mediaAttachment])
    }

    @Test func choiceFieldsListTheEnumsRawValues() {
        #expect(EntityType.issue.description.field(named: "status")?.kind == .choice(Issue.Status.allCases.map(\.rawValue)))
        #expect(EntityType.member.description.field(named: "role")?.kind == .choice(Member.Role.allCases.map(\.rawValue)))
    }

    @Test func timestampsRoundTripAtMillisecondPrecision() {
        var random = SeededGenerator(seed: 42)
        for _ in 0..<1_000 {
            let date = Date(timeIntervalSince1970: Double(Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &random)) / 1000)
            #expect(Timestamp.date(from: Timestamp.string(from: date)) == date)
        }
        #expect(Timestamp.string(from: Date(timeIntervalSince1970: 0.5)) == "1970-01-01T00:00:00.500Z")
        #expect(Timestamp.string(from: Date(timeIntervalSince1970: -0.25)) == "1969-12-31T23:59:59.750Z")
        #expect(Timestamp.date(from: "2026-11-22T18:46:17Z") == Date(timeIntervalSince1970: 1_795_373_177))
        #expect(Timestamp.date(from: "2026-11-22T18:46:17.5Z") == Date(timeIntervalSince1970: 1_795_373_177.5))
        #expect(Timestamp.date(from: "2026-11-22 18:46") == nil)
        #expect(Timestamp.date(from: "2026-11-22T18:46:17.Z") == nil)
    }
}
