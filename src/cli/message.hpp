// cli/message.hpp — moved to cli/common/message.hpp; this forwarder is kept only for src/serve/command/backends.cpp,
// which another change owns: once its include names cli/common/message.hpp, delete this file.
#pragma once

#include "cli/common/message.hpp"
