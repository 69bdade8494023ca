import Shared

// The APNs simulator: see issue "APNs HTTP/2 client with pooled connections, and a strict APNs simulator".
let logger = Logger(component: "apns-simulator")
logger.error("not implemented yet")
