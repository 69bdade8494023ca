import Shared

let configuration = ServiceMain.load { () throws(ConfigurationError) in try IngressConfiguration() }
let logger = Logger(component: "ingress", minimumLevel: configuration.common.logLevel)
logger.notice("started", metadata: ["listen": configuration.listen.description])
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
