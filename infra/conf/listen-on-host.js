// Preloaded (node --require) into Marquez's web server, whose listen(port) has no bind setting and
// would accept connections on every interface: the stack's servers listen on LISTEN_HOST only.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  const portOnly = (typeof port === 'number' || typeof port === 'string') && typeof rest[0] !== 'string';
  return portOnly ? listen.call(this, port, process.env.LISTEN_HOST, ...rest) : listen.call(this, port, ...rest);
};
