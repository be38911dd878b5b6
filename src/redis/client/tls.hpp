// src/redis/client/tls.hpp — the OpenSSL side of a rediss:// connection: the context built once from the options
// (trust store, client certificate), the per-session settings (SNI, the name to verify), and the words for a failed
// handshake. Private to the client: Asio's SSL types and OpenSSL's stay out of the public headers.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <string>

#include "admit/errc.hpp"
#include "admit/redis/client/options.hpp"

namespace admit::redis::detail {

// The TLS context for `o` (o.tls must be true): TLS 1.2 or later; the server's certificate verified against
// o.tls_ca_file (or the system's trust store when empty) unless o.tls_insecure_skip_verify; the client certificate
// and key when given. Throws std::invalid_argument naming the option and the file that OpenSSL could not load, with
// OpenSSL's reason.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const connection_options& o);

// Prepares a new session `ssl` for the server `o` names: SNI (host names only, never an IP address) and, unless
// verification is off, the name its certificate must carry (o.tls_server_name, else o.host; an IP address is checked
// against the certificate's IP addresses). Returns false, with the reason in `why`, if OpenSSL refuses.
bool prepare_tls_session(SSL* ssl, const connection_options& o, std::string& why);

// A failed handshake as an error code and words: tls_verify_failed when the server's certificate was not accepted
// (OpenSSL's verification result: "unable to get local issuer certificate", "hostname mismatch", ...), else
// tls_handshake_failed (the server's alert or the system's error).
errc classify_tls_failure(SSL* ssl, const boost::system::error_code& ec, std::string& why);

// Whether `ec` comes from the TLS layer (OpenSSL's errors, a truncated stream).
bool is_tls_error(const boost::system::error_code& ec) noexcept;

}  // namespace admit::redis::detail
