@testable import Shared

/// The `CryptoError` code `body` throws, or nil if it succeeds or throws something else.
func errorCode(_ body: () throws -> Any) -> CryptoError.Code? {
    do {
        _ = try body()
        return nil
    } catch let error as CryptoError {
        return error.code
    } catch {
        return nil
    }
}

func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}
