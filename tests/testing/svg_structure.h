// Reads a RenderSvg document (traces/svg_render.h) back the way tests need
// it: whether it is well-formed XML, its elements with their attributes and
// text, and its blocks with their labels. A small tokenizer, not an XML
// library: it knows what RenderSvg writes (no comments, CDATA or DOCTYPE)
// and rejects anything else as malformed.
#ifndef JITPIPE_TESTS_TESTING_SVG_STRUCTURE_H_
#define JITPIPE_TESTS_TESTING_SVG_STRUCTURE_H_

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "traces/svg_text.h"

namespace jitpipe::testing {

struct SvgElement {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // the text right after the start tag, unescaped

  double Num(const std::string& attr) const {
    auto it = attrs.find(attr);
    return it == attrs.end() ? -1 : std::strtod(it->second.c_str(), nullptr);
  }
  std::string Attr(const std::string& attr) const {
    auto it = attrs.find(attr);
    return it == attrs.end() ? "" : it->second;
  }
};

struct ParsedSvg {
  std::string error;  // empty when well-formed
  std::vector<SvgElement> elements;  // in document order
  std::vector<const SvgElement*> OfClass(const std::string& cls) const {
    std::vector<const SvgElement*> out;
    for (const SvgElement& e : elements) {
      if (e.Attr("class") == cls) out.push_back(&e);
    }
    return out;
  }
};

// One block: its <g>'s rect and label (nullptr when it shows none).
struct SvgBlockView {
  const SvgElement* rect = nullptr;
  const SvgElement* label = nullptr;
};

namespace svg_internal {

inline bool Unescape(const std::string& in, std::string& out) {
  static const std::map<std::string, char> kEntities = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '>') return false;  // RenderSvg escapes it everywhere
    if (in[i] != '&') {
      out += in[i];
      continue;
    }
    const size_t semi = in.find(';', i);
    if (semi == std::string::npos) return false;
    auto it = kEntities.find(in.substr(i + 1, semi - i - 1));
    if (it == kEntities.end()) return false;
    out += it->second;
    i = semi;
  }
  return true;
}

// Parses the attributes of a start tag's inside (after its name).
inline bool ParseAttrs(const std::string& s, std::map<std::string, std::string>& attrs) {
  size_t i = 0;
  while (true) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i == s.size()) return true;
    const size_t eq = s.find("=\"", i);
    if (eq == std::string::npos) return false;
    const std::string name = s.substr(i, eq - i);
    if (name.empty() || name.find_first_of(" \"<>") != std::string::npos) return false;
    const size_t close = s.find('"', eq + 2);
    if (close == std::string::npos) return false;
    std::string value;
    if (!Unescape(s.substr(eq + 2, close - eq - 2), value) || attrs.count(name) != 0) return false;
    attrs[name] = value;
    i = close + 1;
  }
}

}  // namespace svg_internal

inline ParsedSvg ParseSvg(const std::string& svg) {
  ParsedSvg p;
  std::vector<std::string> open;
  size_t i = 0;
  auto fail = [&](const std::string& what) {
    p.error = what + " at byte " + std::to_string(i);
    return p;
  };
  if (svg.rfind("<?xml", 0) == 0) i = svg.find("?>") + 2;
  bool root_seen = false;
  while (i < svg.size()) {
    const size_t lt = svg.find('<', i);
    const std::string text = svg.substr(i, (lt == std::string::npos ? svg.size() : lt) - i);
    std::string unescaped;
    if (!svg_internal::Unescape(text, unescaped)) return fail("bad text \"" + text + "\"");
    if (open.empty() && unescaped.find_first_not_of(" \n") != std::string::npos) {
      return fail("text outside the root");
    }
    if (!p.elements.empty() && !open.empty() && p.elements.back().name == open.back() &&
        p.elements.back().text.empty()) {
      p.elements.back().text = unescaped;
    }
    if (lt == std::string::npos) break;
    i = lt;
    const size_t gt = svg.find('>', lt);
    if (gt == std::string::npos) return fail("unterminated tag");
    std::string tag = svg.substr(lt + 1, gt - lt - 1);
    if (!tag.empty() && tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return fail("mismatched </" + tag + ">");
      open.pop_back();
    } else {
      const bool empty = !tag.empty() && tag.back() == '/';
      if (empty) tag.pop_back();
      const size_t space = tag.find(' ');
      SvgElement e{.name = tag.substr(0, space), .attrs = {}, .text = {}};
      if (e.name.empty()) return fail("a tag without a name");
      if (open.empty() && root_seen) return fail("a second root");
      root_seen = true;
      if (space != std::string::npos && !svg_internal::ParseAttrs(tag.substr(space), e.attrs)) {
        return fail("bad attributes in <" + tag + ">");
      }
      if (!empty) open.push_back(e.name);
      p.elements.push_back(std::move(e));
    }
    i = gt + 1;
  }
  if (!open.empty()) return fail("<" + open.back() + "> is not closed");
  if (!root_seen) return fail("no root element");
  return p;
}

// The blocks: each <g> holds a <title>, a <rect> and maybe a label.
inline std::vector<SvgBlockView> SvgBlocks(const ParsedSvg& p) {
  std::vector<SvgBlockView> blocks;
  for (size_t i = 0; i < p.elements.size(); ++i) {
    if (p.elements[i].name != "g") continue;
    SvgBlockView b;
    for (size_t j = i + 1; j < p.elements.size() && p.elements[j].name != "g"; ++j) {
      if (p.elements[j].name == "rect" && b.rect == nullptr) b.rect = &p.elements[j];
      if (p.elements[j].Attr("class") == "label") b.label = &p.elements[j];
    }
    blocks.push_back(b);
  }
  return blocks;
}

// Whether `step` is 1, 2 or 5 times a power of ten.
inline bool IsRoundStep(double step) {
  if (!(step > 0)) return false;
  const double power = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double mantissa = step / power;
  for (double m : {1.0, 2.0, 5.0}) {
    if (std::fabs(mantissa - m) < 1e-6) return true;
  }
  return false;
}

// What makes a diagram unreadable, one line per problem; empty when none:
// malformed XML; a label wider (svg_text.h's estimate) or taller than its
// block, or off its centre; a title, legend or note line past the page's
// right edge; a row label past its left edge; no legend; axis ticks that
// do not start at 0 or are not evenly spaced at 1, 2 or 5 times a power of
// ten; no axis unit.
inline std::vector<std::string> SvgLayoutProblems(const std::string& svg) {
  const ParsedSvg p = ParseSvg(svg);
  if (!p.error.empty()) return {"malformed: " + p.error};
  std::vector<std::string> problems;
  const double page = p.elements[0].Num("width");
  for (const SvgBlockView& b : SvgBlocks(p)) {
    if (b.rect == nullptr) {
      problems.push_back("a <g> without a rect");
      continue;
    }
    if (b.label == nullptr) continue;
    const double font = b.label->Num("font-size");
    const double w = TextWidthPx(b.label->text, font);
    if (w > b.rect->Num("width") || font > b.rect->Num("height") ||
        std::fabs(b.label->Num("x") - (b.rect->Num("x") + b.rect->Num("width") / 2)) > 0.02) {
      problems.push_back("label \"" + b.label->text + "\" (" + std::to_string(w) +
                         " px) does not fit its block of " + b.rect->Attr("width") + " px");
    }
  }
  for (const char* cls : {"title", "legend", "note"}) {
    for (const SvgElement* e : p.OfClass(cls)) {
      const FontWeight weight =
          e->Attr("font-weight") == "bold" ? FontWeight::kBold : FontWeight::kNormal;
      if (e->Num("x") + TextWidthPx(e->text, e->Num("font-size"), weight) > page) {
        problems.push_back(std::string(cls) + " \"" + e->text + "\" runs past the page's " +
                           std::to_string(page) + " px");
      }
    }
  }
  for (const SvgElement* e : p.OfClass("row")) {
    if (e->Num("x") - TextWidthPx(e->text, e->Num("font-size")) < 0) {
      problems.push_back("row label \"" + e->text + "\" runs past the left edge");
    }
  }
  if (p.OfClass("legend").empty()) problems.push_back("no legend");
  if (p.OfClass("axis").empty()) problems.push_back("no axis unit");
  const std::vector<const SvgElement*> ticks = p.OfClass("tick");
  if (ticks.size() < 2) {
    problems.push_back("fewer than 2 ticks");
  } else {
    const double step = std::strtod(ticks[1]->text.c_str(), nullptr);
    if (ticks[0]->text != "0" || !IsRoundStep(step)) {
      problems.push_back("ticks start " + ticks[0]->text + ", " + ticks[1]->text);
    }
    for (size_t i = 0; i < ticks.size(); ++i) {
      const double t = std::strtod(ticks[i]->text.c_str(), nullptr);
      if (std::fabs(t - static_cast<double>(i) * step) > 1e-9 * std::max(1.0, t)) {
        problems.push_back("tick " + std::to_string(i) + " is " + ticks[i]->text);
      }
    }
  }
  return problems;
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_SVG_STRUCTURE_H_
