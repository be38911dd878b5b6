// The OpenSSL side of rediss:// connections (see tls.hpp).
#include "tls.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <stdexcept>
#include <string>

namespace admit::redis::detail {
namespace {

namespace asio = boost::asio;

bool is_ip_address(const std::string& host) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

// Loads one file into the context; on failure throws naming the option, the file and OpenSSL's reason.
template <class Load>
void load(const char* option, const std::string& file, Load&& load_file) {
  boost::system::error_code ec;
  load_file(ec);
  if (ec) {
    throw std::invalid_argument("redis connection_options: " + std::string(option) + " '" + file +
                                "' could not be loaded: " + ec.message() + " (want a readable PEM file)");
  }
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const connection_options& o) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  if (o.tls_insecure_skip_verify) {
    ctx->set_verify_mode(asio::ssl::verify_none);
  } else {
    ctx->set_verify_mode(asio::ssl::verify_peer);
    if (o.tls_ca_file.empty()) {
      boost::system::error_code ec;
      ctx->set_default_verify_paths(ec);  // the system's trust store; a missing one fails the handshake, not this
    } else {
      load("tls_ca_file", o.tls_ca_file,
           [&](boost::system::error_code& ec) { ctx->load_verify_file(o.tls_ca_file, ec); });
    }
  }
  if (!o.tls_cert_file.empty()) {
    load("tls_cert_file", o.tls_cert_file,
         [&](boost::system::error_code& ec) { ctx->use_certificate_chain_file(o.tls_cert_file, ec); });
    load("tls_key_file", o.tls_key_file, [&](boost::system::error_code& ec) {
      ctx->use_private_key_file(o.tls_key_file, asio::ssl::context::pem, ec);
    });
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      throw std::invalid_argument("redis connection_options: tls_key_file '" + o.tls_key_file +
                                  "' is not the key of tls_cert_file '" + o.tls_cert_file + "'");
    }
  }
  return ctx;
}

bool prepare_tls_session(SSL* ssl, const connection_options& o, std::string& why) {
  const std::string& name = o.tls_server_name.empty() ? o.host : o.tls_server_name;
  const bool ip = is_ip_address(name);
  if (!ip && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
    why = "TLS: cannot send server name '" + name + "' (SNI)";
    return false;
  }
  if (o.tls_insecure_skip_verify) return true;
  // OpenSSL checks the name during verification: a mismatch is a verification error ("hostname mismatch", "IP
  // address mismatch") like any other.
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                    : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
  if (ok != 1) {
    why = "TLS: cannot verify against server name '" + name + "'";
    return false;
  }
  if (!ip) X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return true;
}

errc classify_tls_failure(SSL* ssl, const boost::system::error_code& ec, std::string& why) {
  const long verify = ssl == nullptr ? X509_V_OK : SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    why = std::string("server certificate not accepted: ") + X509_verify_cert_error_string(verify);
    return errc::tls_verify_failed;
  }
  why = ec.message();
  return errc::tls_handshake_failed;
}

bool is_tls_error(const boost::system::error_code& ec) noexcept {
  return ec.category() == asio::error::get_ssl_category() || ec == asio::ssl::error::stream_truncated;
}

}  // namespace admit::redis::detail
