import Foundation
import TestSupport

/// Real RFC 8291 bodies from Python's `http_ece` (as pywebpush uses it), for a
/// fresh receiver key pair.
enum PythonWebPush {
    static func encrypt(_ text: String) async throws -> [UInt8] {
        let script = """
            import base64, os, sys, http_ece
            from cryptography.hazmat.primitives.asymmetric import ec
            receiver = ec.generate_private_key(ec.SECP256R1())
            sender = ec.generate_private_key(ec.SECP256R1())
            body = http_ece.encrypt(sys.argv[1].encode(), private_key=sender, dh=receiver.public_key(),
                                    auth_secret=os.urandom(16), version="aes128gcm")
            sys.stdout.write(base64.urlsafe_b64encode(body).decode())
            """
        let encoded = try await PythonScript.run(script, [text])
        guard let bytes = Data(base64Encoded: Self.standardBase64(encoded)) else {
            throw RawHTTPClient.Failure(description: "python http_ece printed no base64url")
        }
        return Array(bytes)
    }

    /// Foundation decodes standard base64 only, padded.
    private static func standardBase64(_ text: String) -> String {
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return standard + String(repeating: "=", count: (4 - standard.count % 4) % 4)
    }
}
