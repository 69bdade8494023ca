import Foundation
import TestSupport

/// A device's and a backend's RFC 8291 side in Python (`cryptography`, `pywebpush`,
/// `http_ece`): make device keys, encrypt for a listed device as a backend would,
/// decrypt what the device received. `PUSHGATE_PYTHON` names the interpreter.
enum PythonBackend {
    static let script = """
        import base64, json, os, sys
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives import serialization
        def b64(data): return base64.urlsafe_b64encode(data).decode().rstrip('=')
        def unb64(text): return base64.urlsafe_b64decode(text + '=' * (-len(text) % 4))
        mode = sys.argv[1]
        if mode == 'keys':
            key = ec.generate_private_key(ec.SECP256R1())
            point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            print(json.dumps({'private': format(key.private_numbers().private_value, 'x'), 'p256dh': b64(point),
                              'auth': b64(os.urandom(16))}))
        elif mode == 'encrypt':
            from pywebpush import WebPusher
            info = {'endpoint': 'https://unused.invalid/', 'keys': {'p256dh': sys.argv[2], 'auth': sys.argv[3]}}
            encoded = WebPusher(info).encode(sys.argv[4].encode(), content_encoding='aes128gcm')
            print(b64(encoded['body']))
        elif mode == 'decrypt':
            import http_ece
            key = ec.derive_private_key(int(sys.argv[2], 16), ec.SECP256R1())
            print(http_ece.decrypt(unb64(sys.argv[4]), private_key=key, auth_secret=unb64(sys.argv[3]),
                                   version='aes128gcm').decode())
        """

    static func run(_ arguments: [String]) async throws -> String {
        try await PythonScript.run(script, arguments)
    }
}
