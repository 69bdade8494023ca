/// Moves a loop-confined object through the test's async code; the test only
/// touches it again inside `loop.submit`.
package struct UncheckedBox<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}
