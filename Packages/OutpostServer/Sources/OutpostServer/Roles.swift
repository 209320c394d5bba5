import Foundation
import OutpostModels

/// What each member role may write, checked per mutation at push. The product's rule: money
/// (discounts, finance options, fees) and membership are the office's; the crew records the field.
///
/// | role | may write |
/// |---|---|
/// | owner, projectManager | every entity |
/// | estimator | every entity but members |
/// | foreman, crew | every entity but discounts, finance options, fees and members |
/// | viewer | nothing |
///
/// A member's role in a project is the `role` of that project's member record naming the user (the
/// most privileged, should there be several); a member no member record names (the creator of a
/// project made on a device, before anyone wrote a member record for them) is its owner.
enum Roles {
    /// The entities only the office writes.
    static let officeEntities: Set<EntityType> = [.discount, .financeOption, .fee, .member]

    /// Whether `role` may create, change or delete records of `entity`.
    static func mayWrite(_ entity: EntityType, as role: Member.Role) -> Bool {
        switch role {
        case .owner, .projectManager: true
        case .estimator: entity != .member
        case .foreman, .crew: !officeEntities.contains(entity)
        case .viewer: false
        }
    }

    /// The strongest of `roles` (owner first), or nil when there is none.
    static func strongest(_ roles: some Sequence<Member.Role>) -> Member.Role? {
        roles.min { order($0) < order($1) }
    }

    private static func order(_ role: Member.Role) -> Int {
        Member.Role.allCases.firstIndex(of: role) ?? .max
    }

    /// The role a member record's fields name for `user`, if the record names that user.
    static func role(in fields: [String: FieldValue], of user: UUID) -> Member.Role? {
        guard case .uuid(user) = fields["userID"] ?? .null, case .text(let name) = fields["role"] ?? .null else { return nil }
        return Member.Role(rawValue: name)
    }
}
