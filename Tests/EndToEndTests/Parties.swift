import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// The real parties, in Python: the Web Push sender is `pywebpush` (posting over
/// HTTP to the subscription's push URL with `requests`), and the app's notification
/// extension is `http_ece` + `cryptography` with the device's own private key.
/// `PUSHGATE_PYTHON` (or the repository's `.venv`) names the interpreter.
enum Parties {
    static let script = """
        import base64, json, os, sys
        import requests
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives import serialization
        def b64(data): return base64.urlsafe_b64encode(data).decode().rstrip('=')
        def unb64(text): return base64.urlsafe_b64decode(text + '=' * (-len(text) % 4))
        class Recording(requests.Session):
            # Keeps the exact body pywebpush put on the wire.
            sent = None
            def post(self, url, data=None, **kwargs):
                Recording.sent = data
                return super().post(url, data=data, **kwargs)
        mode = sys.argv[1]
        if mode == 'keys':
            key = ec.generate_private_key(ec.SECP256R1())
            point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            print(json.dumps({'private': format(key.private_numbers().private_value, 'x'), 'p256dh': b64(point),
                              'auth': b64(os.urandom(16))}))
        elif mode == 'send':
            from pywebpush import WebPusher
            endpoint, p256dh, auth, plaintext = sys.argv[2], sys.argv[3], sys.argv[4], unb64(sys.argv[5])
            info = {'endpoint': endpoint, 'keys': {'p256dh': p256dh, 'auth': auth}}
            response = WebPusher(info, requests_session=Recording()).send(
                plaintext, {}, ttl=3600, content_encoding='aes128gcm', timeout=10)
            print(json.dumps({'status': response.status_code, 'sent': b64(Recording.sent), 'text': response.text}))
        elif mode in ('send-legacy', 'send-stalwart'):
            # The aes128gcm body as base64url text with a JSON content type. send-legacy: bare,
            # no Content-Encoding. send-stalwart: what Stalwart's push (2022-2025) put on the
            # wire, padded text with Content-Encoding: aes128gcm all the same.
            from pywebpush import WebPusher
            endpoint, p256dh, auth, plaintext = sys.argv[2], sys.argv[3], sys.argv[4], unb64(sys.argv[5])
            info = {'endpoint': endpoint, 'keys': {'p256dh': p256dh, 'auth': auth}}
            body = WebPusher(info).encode(plaintext, content_encoding='aes128gcm')['body']
            if mode == 'send-legacy':
                text, headers = b64(body), {'Content-Type': 'application/json', 'TTL': '3600'}
            else:
                text = base64.urlsafe_b64encode(body).decode()
                headers = {'Content-Type': 'application/json', 'TTL': '86400', 'Content-Encoding': 'aes128gcm'}
            response = requests.post(endpoint, data=text.encode(), timeout=10, headers=headers)
            print(json.dumps({'status': response.status_code, 'sent': b64(body), 'text': response.text}))
        elif mode == 'decrypt':
            import http_ece
            key = ec.derive_private_key(int(sys.argv[2], 16), ec.SECP256R1())
            print(b64(http_ece.decrypt(unb64(sys.argv[4]), private_key=key, auth_secret=unb64(sys.argv[3]),
                                       version='aes128gcm')))
        """

    /// A device's key pair as the app makes it at install.
    struct DeviceKeys {
        let privateKeyHex: String
        let p256dh: String
        let auth: String
    }

    /// What the sender did: the HTTP status it got and the exact ciphertext it sent.
    struct Sent {
        let status: Int
        let ciphertext: [UInt8]
        let text: String
    }

    static func run(_ arguments: [String]) async throws -> String {
        try await PythonScript.run(script, arguments)
    }

    static func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static func deviceKeys() async throws -> DeviceKeys {
        let object = try object(try await run(["keys"]))
        return DeviceKeys(
            privateKeyHex: try #require(object["private"] as? String), p256dh: try #require(object["p256dh"] as? String),
            auth: try #require(object["auth"] as? String))
    }

    /// How the sender puts the aes128gcm message on the wire.
    enum Form: String {
        /// RFC 8291, by pywebpush.
        case rfc8291 = "send"
        /// Base64url text, `Content-Type: application/json`, no `Content-Encoding`.
        case legacyText = "send-legacy"
        /// Older Stalwart releases: padded base64url text, `Content-Type: application/json`
        /// and `Content-Encoding: aes128gcm`.
        case olderStalwart = "send-stalwart"
    }

    /// The sender pushes `plaintext` to `endpoint`, encrypted for `keys`.
    static func send(_ plaintext: [UInt8], to endpoint: String, keys: DeviceKeys, legacy: Bool = false) async throws -> Sent {
        try await send(plaintext, to: endpoint, keys: keys, form: legacy ? .legacyText : .rfc8291)
    }

    static func send(_ plaintext: [UInt8], to endpoint: String, keys: DeviceKeys, form: Form) async throws
        -> Sent
    {
        let object = try object(
            try await run([form.rawValue, endpoint, keys.p256dh, keys.auth, Base64URL.encode(plaintext)]))
        let sent = try #require(object["sent"] as? String)
        return Sent(
            status: try #require(object["status"] as? Int), ciphertext: try #require(Base64URL.decode(sent)),
            text: object["text"] as? String ?? "")
    }

    /// The app decrypts a base64url ciphertext with its private key.
    static func decrypt(_ ciphertext: String, keys: DeviceKeys) async throws -> [UInt8] {
        try #require(Base64URL.decode(try await run(["decrypt", keys.privateKeyHex, keys.auth, ciphertext])))
    }

    /// Plaintext a JMAP server would send, unique per call.
    static func jmap(_ type: String) -> [UInt8] {
        let tag = Base64URL.encode(SecureRandom.bytes(12))
        switch type {
        case "PushVerification":
            return Array(
                #"{"@type":"PushVerification","pushSubscriptionId":"ps-\#(tag)","verificationCode":"\#(tag)"}"#.utf8)
        default:
            return Array(#"{"@type":"StateChange","changed":{"a\#(tag)":{"Email":"s\#(tag)","Mailbox":"m1"}}}"#.utf8)
        }
    }
}

/// The app's side against the ingress, as an iOS app calls it over HTTP.
struct App {
    let stack: DeliveryStack
    let keys: Parties.DeviceKeys
    let token: String
    let id: String
    let secret: String
    /// The push URL the ingress returned, as the app hands it to the server.
    let url: String

    /// POST /v1/subscriptions with a token, placeholder alert and the device keys; not activated.
    static func register(_ stack: DeliveryStack, alert: (title: String, body: String) = ("Mail", "New message"))
        async throws -> App
    {
        let keys = try await Parties.deviceKeys()
        let token = Fixture.token()
        let json = """
            {"topic":"\(stack.fixture.topic)","token":"\(token)","sandbox":false,\
            "alert":{"title":"\(alert.title)","body":"\(alert.body)"},\
            "keys":{"p256dh":"\(keys.p256dh)","auth":"\(keys.auth)"}}
            """
        let response = try await stack.request(
            "POST", "/api/push/v1/subscriptions", headers: [("Content-Type", "application/json")], body: Array(json.utf8))
        try #require(response.status == 201, "registration answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
        return App(
            stack: stack, keys: keys, token: token, id: try #require(object["id"]), secret: try #require(object["secret"]),
            url: try #require(object["url"]))
    }

    /// Where the sender reaches the push URL in this test: the URL's path on the ingress's
    /// loopback port (the public host name is not resolvable here).
    var endpoint: String {
        let path = URLComponents(string: url)?.path ?? ""
        return "http://127.0.0.1:\(stack.ingress.port)\(path)"
    }

    var authorization: [(String, String)] { [("Authorization", "Bearer \(secret)")] }

    func pending() async throws -> [String] {
        let response = try await stack.request(
            "GET", "/api/push/v1/subscriptions/\(id)/pending", headers: authorization)
        try #require(response.status == 200, "pending answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return try #require(object["messages"] as? [String])
    }

    func activate() async throws {
        let response = try await stack.request(
            "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: authorization)
        try #require(response.status == 204, "activate answered \(response.status) \(response.text)")
    }

    /// The notifications Apple delivered to this device, as JSON payloads.
    func delivered() throws -> [[String: Any]] {
        try stack.recordings(token: token).map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any])
        }
    }

    /// The notification extension: decrypts `c` of a delivered payload.
    func decrypt(_ payload: [String: Any]) async throws -> [UInt8] {
        try await Parties.decrypt(try #require(payload["c"] as? String, "no c in \(payload)"), keys: keys)
    }
}
