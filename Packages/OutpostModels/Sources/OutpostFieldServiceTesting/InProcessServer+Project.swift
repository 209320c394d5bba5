import Foundation
import OutpostModels
import OutpostServer
import OutpostServerTesting

extension InProcessServer {
    /// Creates a project on the server, as the user (who becomes its owner), and returns its id: a
    /// record the server does not hold cannot be a parent, so a test's records need one.
    public func newProject(name: String = "Test project") async throws(ServerError) -> UUID {
        let project = Project(name: name)
        try await create(project)
        return project.id
    }
}
