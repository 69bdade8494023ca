import Testing

@testable import IngressService

/// The App API's paths and methods.
@Suite struct AppAPIRouteTests {
    @Test func pathsAndMethods() {
        let base = "/api/v1/app/push"
        #expect(Route(method: "POST", path: base + "/send") == .appSend)
        #expect(Route(method: "GET", path: base + "/send") == .methodNotAllowed(allowed: "POST"))
        #expect(Route(method: "POST", path: base + "/subscriptions/bind") == .appBind)
        #expect(Route(method: "DELETE", path: base + "/subscriptions/abc/bind") == .appUnbind(id: "abc"))
        #expect(Route(method: "POST", path: base + "/subscriptions/abc/bind") == .methodNotAllowed(allowed: "DELETE"))
        #expect(Route(method: "GET", path: base + "/users/42/devices") == .appDevices(userID: "42"))
        #expect(Route(method: "GET", path: base + "/users//devices") == .notFound)
        #expect(Route(method: "GET", path: base + "/users/42/devices/x") == .notFound)
        #expect(Route.appDevices(userID: "42").label == "GET /v1/app/push/users/{userId}/devices")
    }
}
