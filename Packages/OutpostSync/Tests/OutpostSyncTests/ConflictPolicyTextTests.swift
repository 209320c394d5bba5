import OutpostConflicts
import OutpostModels
import OutpostWire
import Testing
@testable import OutpostSync

/// `Outpost-Conflict-Policy` and `--conflict-policy`: one text form, read back exactly, and a typo
/// refused where a person typed it rather than run as another policy.
@Suite struct ConflictPolicyTextTests {
    @Test func aPolicyReadsBackFromItsText() {
        let policy = ConflictPolicy(overriding: [.issue: .manual, .discount: .clientWins])
        let text = SyncProtocol.conflictPolicyText(policy)
        #expect(text == "discount=clientWins,issue=manual")
        #expect(SyncProtocol.conflictPolicy(fromText: text) == policy)
        #expect(SyncProtocol.conflictPolicyText(ConflictPolicy()) == "default")
        #expect(SyncProtocol.conflictPolicy(fromText: "default") == ConflictPolicy())
    }

    @Test(arguments: ["isue=manual", "ISSUE=manual", "bogus=manual", "issue=manual,issue=clientWins"])
    func aTypedPolicyWithAnUnknownOrRepeatedEntityIsRefused(_ text: String) {
        #expect(SyncProtocol.conflictPolicy(fromText: text, strict: true) == nil)
    }

    @Test(arguments: ["issue=bogus", "issue=MANUAL", "issue=", "=manual", "issue"])
    func aPolicyWithAnUnknownStrategyIsUnreadable(_ text: String) {
        #expect(SyncProtocol.conflictPolicy(fromText: text) == nil)
    }

    @Test func aServersEntityThisAppDoesNotKnowIsSkipped() {
        #expect(SyncProtocol.conflictPolicy(fromText: "issue=manual,punchListItem=serverWins")
            == ConflictPolicy(overriding: [.issue: .manual]))
    }
}
