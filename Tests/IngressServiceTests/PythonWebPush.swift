import Foundation
import TestSupport

/// Real RFC 8291 bodies from Python's `http_ece` (as pywebpush uses it), for a
/// fresh receiver key pair.
enum PythonWebPush {
    static var python: String {
        ProcessInfo.processInfo.environment["PUSHGATE_PYTHON"]
            ?? TestEnvironment.repositoryRoot.appendingPathComponent(".venv/bin/python3").path
    }

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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-c", script, text]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, let bytes = Data(base64Encoded: Self.standardBase64(data)) else {
            throw RawHTTPClient.Failure(description: "python http_ece failed")
        }
        return Array(bytes)
    }

    private static func standardBase64(_ data: Data) -> String {
        String(decoding: data, as: UTF8.self).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
    }
}
