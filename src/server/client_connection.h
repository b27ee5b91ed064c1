// Whether the client of a request is still connected, so that a non-streamed completion can be
// cancelled when its client goes away before the answer is ready.
//
// Why not cpp-httplib's own means: Debian's cpp-httplib 0.11.4 has no Request::is_connection_closed,
// and DataSink::is_writable only selects the socket for writing, which a socket whose peer has
// closed still passes; answering through a content provider would also send the status line before
// the answer exists (a failed generation could no longer be a 500). The request does carry its
// connection's addresses (local and remote address and port), which name one TCP connection: this
// finds that connection's socket among the process's descriptors and asks the kernel whether the
// peer has closed it, without reading or writing anything.
#pragma once

#include <string>

namespace kvslim::server {

class ClientConnection {
 public:
  // The connection local_addr:local_port <-> remote_addr:remote_port, as cpp-httplib reports
  // them (numeric hosts). found() is false when no open socket matches (then closed() is false:
  // nothing is cancelled on a guess).
  ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

  bool found() const { return fd_ >= 0; }
  // True once the peer has closed (or reset) the connection. Data it sent after the request
  // (a pipelined request) counts as alive; it is left unread.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace kvslim::server
