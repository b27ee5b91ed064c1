#include "tasks/word_lists.h"

namespace kvslim::tasks::words {

const std::vector<std::string>& adjectives() {
  static const std::vector<std::string> list = {
      "ancient", "bitter",  "bold",     "brave",   "brief",  "bright", "broad",  "broken",  "busy",   "calm",
      "careful", "cheap",   "cheerful", "chilly",  "clever", "cloudy", "clumsy", "coarse",  "cold",   "cozy",
      "crisp",   "crooked", "cruel",    "curious", "damp",   "dark",   "dear",   "deep",    "dense",  "dim",
      "dizzy",   "dry",     "dull",     "dusty",   "eager",  "early",  "empty",  "fancy",   "fierce", "flat",
      "fragile", "fresh",   "friendly", "frozen",  "gentle", "giant",  "glad",   "golden",  "grand",  "greedy",
      "grumpy",  "hollow",  "hearty",   "huge",    "humble", "hungry", "icy",    "idle",    "jolly",  "keen",
      "kind",    "lazy",    "lively",   "lonely",  "loud",   "lucky",  "mellow", "mighty",  "misty",  "modest",
      "narrow",  "nervous", "noble",    "noisy",   "odd",    "orange", "pale",   "patient", "plain",  "polite",
      "proud",   "purple",  "quick",    "quiet",   "rapid",  "rare",   "rough",  "round",   "rusty",  "sandy",
      "scarlet", "shabby",  "sharp",    "shiny",   "shy",    "silent", "silly",  "silver",  "sleepy", "slow",
      "smooth",  "soft",    "solemn",   "sour",    "sparse", "steady", "steep",  "sticky",  "stormy", "strange",
      "strict",  "sturdy",  "sunny",    "sweet",   "swift",  "tame",   "tender", "thirsty", "tidy",   "tiny",
      "tired",   "vast",    "velvet",   "violet",  "warm",   "weary",  "wicked", "wild",    "windy",  "wise",
      "witty",   "wooden",  "young",    "zealous"};
  return list;
}

const std::vector<std::string>& nouns() {
  static const std::vector<std::string> list = {
      "acorn",   "anchor",   "apple",   "apron",    "arrow",  "badge",    "bagel",    "banjo",   "barrel",
      "basket",  "beacon",   "bean",    "beetle",   "bell",   "bench",    "bicycle",  "blanket", "bottle",
      "bowl",    "bracelet", "bread",   "brick",    "bridge", "broom",    "bucket",   "butter",  "button",
      "cabbage", "cabin",    "cable",   "camel",    "candle", "canoe",    "carpet",   "carrot",  "castle",
      "cherry",  "chimney",  "circus",  "clock",    "cloud",  "coat",     "coin",     "comet",   "compass",
      "cookie",  "copper",   "cotton",  "crayon",   "crown",  "cushion",  "daisy",    "diamond", "dolphin",
      "donkey",  "dragon",   "drum",    "eagle",    "engine", "falcon",   "feather",  "fence",   "fiddle",
      "flag",    "flute",    "fossil",  "fountain", "fox",    "frog",     "gadget",   "giraffe", "glove",
      "goat",    "guitar",   "hammer",  "harp",     "hat",    "helmet",   "honey",    "horse",   "iceberg",
      "igloo",   "jacket",   "jelly",   "jewel",    "kettle", "kite",     "ladder",   "lantern", "lemon",
      "letter",  "lizard",   "lobster", "magnet",   "mango",  "map",      "marble",   "mirror",  "mitten",
      "monkey",  "moose",    "mustard", "napkin",   "needle", "nest",     "notebook", "oar",     "octopus",
      "onion",   "otter",    "owl",     "oyster",   "paddle", "painting", "panda",    "parcel",  "parrot",
      "peach",   "pebble",   "pencil",  "penguin",  "pepper", "piano",    "pickle",   "pillow",  "pirate",
      "planet",  "plum",     "pocket",  "potato",   "puppet", "puzzle",   "quilt",    "rabbit",  "radio",
      "raft",    "raven",    "ribbon",  "robot",    "rocket", "saddle",   "sailor",   "salmon",  "sandal",
      "scarf",   "scooter",  "shovel",  "sled",     "snail",  "sock",     "spider",   "spoon",   "squirrel",
      "statue",  "stool",    "sweater", "tablet",   "teapot", "ticket",   "tiger",    "tomato",  "torch",
      "tractor", "trumpet",  "tulip",   "turnip",   "turtle", "umbrella", "vase",     "violin",  "wagon",
      "walnut",  "walrus",   "whale",   "whistle",  "window", "wizard",   "wolf",     "yacht",   "zebra"};
  return list;
}

const std::vector<std::string>& verbs_past() {
  static const std::vector<std::string> list = {
      "admired",  "borrowed", "buried",   "carried",  "carved",   "chased",   "cleaned", "climbed",  "copied",
      "covered",  "crossed",  "dropped",  "emptied",  "examined", "fetched",  "fixed",   "folded",   "followed",
      "gathered", "grabbed",  "guarded",  "hid",      "hugged",   "ignored",  "juggled", "kicked",   "lifted",
      "loaded",   "measured", "mended",   "missed",   "moved",    "noticed",  "opened",  "ordered",  "packed",
      "painted",  "passed",   "peeled",   "pinched",  "planted",  "polished", "praised", "pulled",   "pushed",
      "repaired", "rescued",  "returned", "sketched", "sold",     "sorted",   "spotted", "squeezed", "stacked",
      "stirred",  "studied",  "swapped",  "tasted",   "tossed",   "traded",   "trimmed", "tugged",   "unlocked",
      "visited",  "washed",   "watched",  "weighed",  "wrapped"};
  return list;
}

const std::vector<std::string>& places() {
  static const std::vector<std::string> list = {
      "airport", "bakery",    "barn",   "beach",   "canyon",  "cave",    "cellar",  "chapel",  "cliff",
      "corner",  "courtyard", "desert", "dock",    "factory", "farm",    "forest",  "garage",  "garden",
      "hallway", "harbor",    "hill",   "island",  "jungle",  "kitchen", "lake",    "library", "market",
      "meadow",  "mill",      "museum", "orchard", "palace",  "park",    "pier",    "plaza",   "pond",
      "prairie", "quarry",    "river",  "school",  "shore",   "square",  "stadium", "station", "studio",
      "swamp",   "theater",   "tower",  "tunnel",  "valley",  "village", "workshop"};
  return list;
}

const std::vector<std::string>& names() {
  static const std::vector<std::string> list = {
      "Ada",   "Alice", "Amir",  "Anna",  "Bruno", "Carla", "Chen", "Clara",  "Daniel", "Dmitri", "Elena", "Emil",
      "Farah", "Felix", "Greta", "Hana",  "Hugo",  "Ines",  "Ivan", "Jonas",  "Julia",  "Kai",    "Kofi",  "Lara",
      "Leo",   "Lucia", "Malik", "Marta", "Mei",   "Nadia", "Nico", "Nora",   "Omar",   "Oscar",  "Priya", "Rafael",
      "Rosa",  "Sami",  "Sofia", "Tariq", "Tomas", "Uma",   "Vera", "Victor", "Wanda",  "Yara",   "Yusuf", "Zoe"};
  return list;
}

const std::vector<std::string>& times() {
  static const std::vector<std::string> list = {
      "at dawn",          "at noon",        "at dusk",       "at midnight",  "last week",
      "last winter",      "last summer",    "on Monday",     "on Friday",    "in the morning",
      "in the evening",   "after lunch",    "before dinner", "every spring", "every autumn",
      "during the storm", "after the rain", "long ago",      "yesterday",    "this morning"};
  return list;
}

const std::vector<std::string>& degrees() {
  static const std::vector<std::string> list = {"very",   "quite",  "rather",    "oddly",        "truly",
                                                "fairly", "almost", "unusually", "surprisingly", "somewhat"};
  return list;
}

const std::vector<std::string>& prepositions() {
  static const std::vector<std::string> list = {"near",   "behind", "beside", "under",  "across",
                                                "inside", "past",   "toward", "around", "beyond"};
  return list;
}

std::string adjective_noun(Rng& rng) { return rng.pick(adjectives()) + "-" + rng.pick(nouns()); }

}  // namespace kvslim::tasks::words
