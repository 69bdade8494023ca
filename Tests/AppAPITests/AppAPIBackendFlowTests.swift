import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// A backend as a real client writes it: list the user's devices, encrypt per
/// device (RFC 8291, pywebpush), send the batch; each device decrypts what the
/// simulator received with its own private key.
@Suite struct AppAPIBackendFlowTests {
    @Test func listEncryptPerDeviceSendAndDecryptAtTheDevice() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let key = try await stack.apiKey()
            let user = try await stack.user()
            var privateKeys: [String: (privateKey: String, auth: String, token: String)] = [:]
            for _ in 0..<2 {
                let generated = try await PythonBackend.run(["keys"])
                let keys = try #require(
                    try JSONSerialization.jsonObject(with: Data(generated.utf8)) as? [String: String])
                let p256dh = try #require(keys["p256dh"])
                let auth = try #require(keys["auth"])
                let device = try await stack.device(keys: (p256dh, auth))
                #expect(try await stack.bind(device.id, secret: device.secret, user: user, key: key).status == 204)
                privateKeys[device.id] = (try #require(keys["private"]), auth, device.token)
            }

            // The backend: devices → per-device ciphertext → one batch.
            let devices = try await stack.devices(user, key: key)
            #expect(devices.count == 2)
            var messages: [(String, String)] = []
            for device in devices {
                let id = try #require(device["id"] as? String)
                let keys = try #require(device["keys"] as? [String: String])
                let ciphertext = try await PythonBackend.run(
                    ["encrypt", try #require(keys["p256dh"]), try #require(keys["auth"]), "hello \(id)"])
                messages.append((id, ciphertext))
            }
            let answered = try await stack.send(messages, key: key)
            #expect(statuses(answered) == ["sent", "sent"])

            // Each device decrypts its notification's `c` with its private key.
            for (id, device) in privateKeys {
                let recorded = try #require(stack.recordings(token: device.token).first)
                let payload = try #require(
                    try JSONSerialization.jsonObject(with: Data(recorded.payload)) as? [String: Any])
                let ciphertext = try #require(payload["c"] as? String)
                let plaintext = try await PythonBackend.run(["decrypt", device.privateKey, device.auth, ciphertext])
                #expect(plaintext == "hello \(id)")
            }
        }
    }
}
