// Text codecs for the scalars of a state dict: optimizer options and counters, LR scheduler
// state, and the plugin state Fabric stores in a checkpoint's metadata (Note [Optimizer state
// dict] in optim/optimizer.h). Numbers are written with %.17g, so a double survives the round trip
// bit for bit; parsing accepts exactly what formatting writes and names the key when it cannot.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace weft::optim {

std::string format_scalar(double value);
std::string format_scalar(bool value);
std::string format_scalar(int64_t value);
std::string format_scalar(const std::pair<double, double>& value);  // "a,b"

// Parse errors name the key and the place given as `where` (the op that reads it).
void parse_scalar(const std::string& key, const std::string& text, double& out,
                  const std::string& where = "[load_state_dict]");
void parse_scalar(const std::string& key, const std::string& text, bool& out);
void parse_scalar(const std::string& key, const std::string& text, int64_t& out);
void parse_scalar(const std::string& key, const std::string& text, std::pair<double, double>& out);

}  // namespace weft::optim
