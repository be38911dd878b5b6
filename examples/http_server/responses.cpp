// examples/http_server/responses.cpp — what admit_http_server answers (responses.hpp).
#include "responses.hpp"

#include <string>
#include <utility>

#include "connections.hpp"

namespace http_server {

http_response render(const admit::asio::rejection& r, unsigned version) {
  http_response res{static_cast<http::status>(r.status()), version};
  for (const auto& f : r.fields()) res.set(f.name(), f.value());
  res.set(http::field::content_type, "text/plain");
  res.body() = std::string(admit::asio::to_string(r.reason)) + "\n";
  return res;
}

http_response plain(http::status status, unsigned version, std::string body) {
  http_response res{status, version};
  res.set(http::field::content_type, "text/plain");
  res.body() = std::move(body);
  return res;
}

http_response stats(const server_state& st, const admit::semaphore* sem, unsigned version) {
  std::string body;
  if (sem != nullptr) {
    body += "capacity " + std::to_string(sem->capacity()) + "\n";
    body += "available " + std::to_string(sem->available()) + "\n";
    body += "in_use " + std::to_string(sem->in_use()) + "\n";
    body += "waiting " + std::to_string(sem->waiting()) + "\n";
  }
  body += "started " + std::to_string(st.started.load()) + "\n";
  body += "connections " + std::to_string(st.connections()) + "\n";
  return plain(http::status::ok, version, std::move(body));
}

bool host_ok(const http::request<http::string_body>& m) { return m.version() < 11 || m.count(http::field::host) == 1; }

http_response metrics(const admit::metrics::registry* reg, unsigned version) {
  auto res = plain(http::status::ok, version, reg != nullptr ? reg->text() : std::string());
  res.set(http::field::content_type, admit::metrics::registry::content_type);
  return res;
}

}  // namespace http_server
