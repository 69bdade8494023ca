import CNGHTTP2
import Foundation
import Testing

@testable import Shared

@Suite struct HTTP2HeaderFieldsTests {
    @Test func fieldsKeepTheirOrderAndValuesWhateverTheWayTheyWereAdded() {
        var fields = HTTP2HeaderFields()
        fields.append(":path", prefix: "/3/device/", "abc")
        fields.append("apns-topic", "com.example.app")
        fields.append("apns-priority") { $0.append(contentsOf: Array("10".utf8)) }
        fields.append("apns-collapse-id", "")
        fields.append(HTTP2Header("x-dynamic", "yes"))
        #expect(fields.count == 5)
        #expect(
            fields.headers == [
                HTTP2Header(":path", "/3/device/abc"), HTTP2Header("apns-topic", "com.example.app"),
                HTTP2Header("apns-priority", "10"), HTTP2Header("apns-collapse-id", ""),
                HTTP2Header("x-dynamic", "yes"),
            ])
        fields.removeAll()
        #expect(fields.count == 0 && fields.headers.isEmpty)
        fields.append(":method", "GET")
        #expect(fields.headers == [HTTP2Header(":method", "GET")])
    }

    @Test func nameValuePairsPointAtTheBytesAndOnlyConstantNamesSkipNghttp2sCopy() {
        var fields = HTTP2HeaderFields([HTTP2Header("x-dynamic", "1")])
        fields.append("authorization", prefix: "bearer ", "t0k3n")
        fields.append("empty", "")
        let pairs = fields.withNameValues { nva in
            nva.map { nv in
                (
                    String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self),
                    nv.value != nil, nv.flags
                )
            }
        }
        #expect(pairs.map(\.0) == ["x-dynamic", "authorization", "empty"])
        #expect(pairs.map(\.1) == ["1", "bearer t0k3n", ""])
        #expect(pairs.allSatisfy { $0.2 })
        #expect(
            pairs.map(\.3) == [
                UInt8(NGHTTP2_NV_FLAG_NONE.rawValue), UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue),
                UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue),
            ])
    }

    /// A field added unindexed reaches HPACK as a literal it never adds to its dynamic
    /// table (a response's `apns-id`, unique each time, would only churn both ends'
    /// tables); the others may be indexed.
    @Test func unindexedFieldsStayOutOfHPACKsDynamicTable() throws {
        func tableEntries(after fields: HTTP2HeaderFields) throws -> Int {
            var deflater: OpaquePointer?
            try #require(nghttp2_hd_deflate_new(&deflater, 4096) == 0)
            defer { nghttp2_hd_deflate_del(deflater) }
            var block = [UInt8](repeating: 0, count: 1024)
            let written = fields.withNameValues { nva in
                nghttp2_hd_deflate_hd(deflater, &block, block.count, nva.baseAddress, nva.count)
            }
            try #require(written > 0)
            return nghttp2_hd_deflate_get_num_table_entries(deflater)
        }
        let staticEntries = 61
        let id = Array("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".utf8)
        var unindexed = HTTP2HeaderFields()
        unindexed.append(":status", "200")
        unindexed.appendUnindexed("apns-id") { $0.append(contentsOf: id) }
        #expect(unindexed.withNameValues { $0[1].flags } & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0)
        #expect(try tableEntries(after: unindexed) == staticEntries)
        var indexed = HTTP2HeaderFields()
        indexed.append(":status", "200")
        indexed.append("apns-id") { $0.append(contentsOf: id) }
        #expect(try tableEntries(after: indexed) == staticEntries + 1)
    }

    @Test func anEmptyListStillGivesValidPointers() {
        var fields = HTTP2HeaderFields()
        fields.append("empty", "")
        let valid = fields.withNameValues { nva in nva.count == 1 && nva[0].value != nil && nva[0].valuelen == 0 }
        #expect(valid)
        #expect(HTTP2HeaderFields().withNameValues { $0.count } == 0)
    }
}

@Suite struct APNsResponseIDTests {
    @Test func apnsIDsParseLikeFoundationInEitherCase() {
        for text in [
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0",
            "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
        ] {
            #expect(APNsResponse.uuid(text) == UUID(uuidString: text), "\(text)")
            #expect(APNsResponse.uuid(text) != nil)
        }
        let id = UUID()
        #expect(APNsResponse.uuid(id.uuidString) == id)
        #expect(APNsResponse.uuid(id.uuidString.lowercased()) == id)
    }

    @Test func anythingElseIsNoID() {
        for text in [
            "", "0f1e2d3c", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f00",
            "0f1e2d3c4b5a-6978-8796-a5b4c3d2e1f0-", "0f1e2d3c-4b5a-6978-8796_a5b4c3d2e1f0",
            "0g1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0}",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fé",
        ] {
            #expect(APNsResponse.uuid(text) == nil, "\(text)")
            #expect(UUID(uuidString: text) == nil, "\(text)")
        }
    }

    @Test func theAnswerReadsStatusAndID() {
        let response = APNsResponse(
            headers: [HTTP2Header(":status", "200"), HTTP2Header("apns-id", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")],
            body: [])
        #expect(response?.status == 200)
        #expect(response?.apnsID == UUID(uuidString: "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0"))
    }
}
