// tests/redis/tls_certificates.hpp — throwaway certificates for TLS tests, made at run time with the openssl program
// (found on PATH, run without a shell) in a temporary directory removed by the destructor: a CA, a server certificate
// for localhost and 127.0.0.1 signed by it, a client certificate signed by it, and a second CA that signed nothing
// the server has (the "wrong CA"). EC P-256 keys, valid for two days.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.hpp"

namespace admit::redis::testing {

class tls_certificates {
 public:
  tls_certificates() {
    char dir_template[] = "/tmp/admit-tls-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir_template;
    self_signed("ca", "admit test CA");
    self_signed("other-ca", "admit other CA");
    signed_by_ca("server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    signed_by_ca("client", "admit test client", "extendedKeyUsage=clientAuth\n");
  }
  ~tls_certificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  tls_certificates(const tls_certificates&) = delete;
  tls_certificates& operator=(const tls_certificates&) = delete;

  std::string ca() const { return path("ca.crt"); }
  std::string other_ca() const { return path("other-ca.crt"); }
  std::string server_cert() const { return path("server.crt"); }
  std::string server_key() const { return path("server.key"); }
  std::string client_cert() const { return path("client.crt"); }
  std::string client_key() const { return path("client.key"); }

 private:
  std::string path(std::string_view name) const { return dir_ + "/" + std::string(name); }

  static std::string openssl() {
    const char* env = std::getenv("PATH");
    std::string paths = env != nullptr ? env : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= paths.size()) {
      const std::size_t end = std::min(paths.find(':', start), paths.size());
      const std::string candidate = paths.substr(start, end - start) + "/openssl";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
    throw std::runtime_error("tls_certificates: no openssl program on PATH");
  }

  static void run(std::vector<std::string> args) {
    args.insert(args.begin(), openssl());
    const auto r = run_program(args);
    if (r.status != 0) throw std::runtime_error("tls_certificates: openssl " + args[1] + " failed: " + r.err);
  }

  void self_signed(const std::string& name, const std::string& cn) {
    run({"req",
         "-x509",
         "-new",
         "-newkey",
         "ec",
         "-pkeyopt",
         "ec_paramgen_curve:prime256v1",
         "-nodes",
         "-keyout",
         path(name + ".key"),
         "-out",
         path(name + ".crt"),
         "-days",
         "2",
         "-subj",
         "/CN=" + cn,
         "-addext",
         "basicConstraints=critical,CA:TRUE",
         "-addext",
         "keyUsage=critical,keyCertSign,cRLSign"});
  }

  void signed_by_ca(const std::string& name, const std::string& cn, const std::string& extensions) {
    const std::string ext = path(name + ".ext");
    std::ofstream(ext) << extensions;
    run({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
         path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=" + cn});
    run({"x509", "-req", "-in", path(name + ".csr"), "-CA", ca(), "-CAkey", path("ca.key"), "-CAcreateserial",
         "-CAserial", path("ca.srl"), "-out", path(name + ".crt"), "-days", "2", "-extfile", ext});
  }

  std::string dir_;
};

}  // namespace admit::redis::testing
