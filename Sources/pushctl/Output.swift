import Foundation

/// Prints answers: the API's JSON as is (pretty, sorted keys) with `--json`, else
/// readable lines: `key: value` for one object, one line per item for lists.
struct Output {
    let json: Bool

    func show(_ value: Any?, list key: String? = nil, columns: [String] = []) {
        guard let value else { return }
        if json {
            let options: JSONSerialization.WritingOptions = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            if let data = try? JSONSerialization.data(withJSONObject: value, options: options) {
                print(String(decoding: data, as: UTF8.self))
            }
            return
        }
        if let key, let items = (value as? [String: Any])?[key] as? [Any] {
            if items.isEmpty { print("(no \(key))") }
            for item in items {
                guard let object = item as? [String: Any] else { continue }
                print(columns.map { Self.text(object[$0]) }.joined(separator: "  "))
            }
            return
        }
        if let object = value as? [String: Any] {
            for name in object.keys.sorted() { print("\(name): \(Self.text(object[name]))") }
        }
    }

    func message(_ text: String) {
        if !json { print(text) }
    }

    static func text(_ value: Any?) -> String {
        switch value {
        case nil, is NSNull: return "-"
        case let string as String: return string
        case let number as NSNumber:
            // JSON booleans arrive as a private NSNumber subclass; plain numbers as NSNumber itself.
            if type(of: number) != NSNumber.self { return number.boolValue ? "true" : "false" }
            return number.stringValue
        case let array as [Any]: return array.isEmpty ? "-" : array.map { text($0) }.joined(separator: ",")
        case let object as [String: Any]:
            return "{" + object.keys.sorted().map { "\($0)=\(text(object[$0]))" }.joined(separator: " ") + "}"
        default: return "\(value!)"
        }
    }
}
