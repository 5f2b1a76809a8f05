"""The made-up repositories' vocabulary and values, split once and for all between training and held-out tasks.

Every word belongs to exactly one split, decided by a hash of the word itself (not by its place in a list), so
adding words never moves an old one across, and a held-out task built only from held-out words and values never
shares a name with a training task. Values split the same way: an integer, a one-decimal float or a word is held out
when its own hash says so. A quarter of everything is held out.
"""

from __future__ import annotations

import builtins
import keyword
import random
import sys
import zlib
from collections.abc import Sequence

SPLITS = ("train", "heldout")
HELDOUT_SHARE = 4  # one value in HELDOUT_SHARE is held out

VERBS = """
adjust align allot amend assess assign audit balance batch bill blend boost bound brew buffer build bundle cache
calibrate cap carve cast charge chart check chop claim clamp classify clean clip coerce collect combine compact
compare compose compute condense confirm convert correct count credit crop cull cure deduct derive detect dilute
dispatch distill divide draft drain dress earn edit encode enrich estimate evaluate expand extract fetch fill
fit flag flatten fold forecast forge frame gather gauge grade graft grind group guard harvest
heat hold index infer inspect issue judge label layer lease level lift limit load lock log mark match measure
melt mend merge mill mint mix mold mount move net normalize note offset order pack pad paint parse patch pin place
plan plot poll post pour press price prime probe project prune pull pump quote raise rank rate
rebase recall reckon record reduce refine reform register release remap render repair report reserve resize
resolve restock route sample scale scan schedule score screen seal seed select settle shape share shift ship
shrink sift sketch skim smooth sow split spread stack stage stamp steer stitch store strip
supply survey swap sweep tally tame taper tax thin tidy tile total trace track
trade trim tune tweak unpack update value vet weigh widen wind wrap zone
"""

NOUNS = """
acorn acre aisle alloy amber anchor angle anvil apple apron arch arrow atlas attic axle badge bakery bale ballot
band banner barley barn barrel basin basket beacon beam bean bell bench berry biscuit blade blanket block bloom
board boat bolt bonnet booth border bottle boulder bow bowl box bracket branch brick bridge brook broom bucket bud
buggy bulb bundle bunker burrow butter button cabin cable cactus cage cake canal candle canoe canvas canyon cargo
carpet cart carton cask castle cedar cellar chain chalk channel chapel charm chart cherry chest chimney chip cider
cinder circuit clay cliff clock cloth cloud clover coach coal coast cobble cocoa coin comet copper coral cord cork
corn cottage cotton cove crane crate creek crest crop crown crumb crystal cup curtain cushion dagger dairy dam dart
deck delta den depot desk dial diamond dock dome donkey door dove dragon drawer drum dune eagle easel ember engine
fable falcon fan farm feather fence ferry fiddle field fig flag flame flask fleet flint flour flute foam forge fork
fossil fountain fox frost fruit furnace gable galley garden garnet gate gear gem glacier glade glass glove goat
gourd grain granite grape gravel grove gull hammer harbor harp hatch hawk hay hazel hearth hedge helmet herb heron
hill hinge hive honey hoof hook horn hut ingot iris island ivory jar jelly jetty jewel kettle kiln kite knot ladder
ladle lagoon lake lamp lantern larch lark latch lava lawn leaf ledge ledger lemon lens lever lily lime linen lodge
loft loom lumber magnet mallet mango manor maple marble market marsh mast meadow melon mesa mill mint mirror moat
mortar moss moth mound mule nail needle nest nettle notch nugget oak oar oasis olive onion orbit orchard otter oven
owl paddle pail palm pantry parcel pasture path pearl pebble pedal pen pepper pier pillar pillow pine pipe plank
plate plaza plum pocket pod pond porch portal pot pouch prism pulley pump quarry quill quilt rafter rail raisin
ramp ranch raven reed reef ridge rivet road robin rocket roof root rope rose rudder rug saddle sail salmon sand
satchel scale scarf schooner scroll shawl shed shell shelf shield shingle shovel shrub sickle silo silver sled
sleeve slate sleigh sloop smithy spade spindle spire spoon spring spruce spur stable stack stake stall stamp staple
steeple stone stool stove straw stream sugar summit swallow swamp sword tack tank tassel teapot tent
thimble thistle thorn thread throne tile timber tinder toad torch tower trail tray trellis trough trowel
trumpet trunk tulip tundra tunnel turnip twig valley valve vat velvet vessel vine violet wagon walnut wand
warehouse wasp wax weasel well wharf wheat whistle wick willow windmill wing wire wren yarn yoke
"""

# The first word of a configuration constant's name: MAX_ + a noun.
QUALIFIERS = """
max min default base total extra initial limit spare reserve peak floor ceiling fallback target start end step
batch chunk page buffer retry idle warm cold grace burst quota margin slack window stride
"""

# The names a repository gives its configuration module.
CONFIG_MODULES = """
settings config constants defaults options tunables limits params knobs presets prefs parameters conf
tuning policy thresholds rules
"""

# Words that string constants hold.
VALUE_WORDS = """
amber azure birch bronze cobalt coral crimson dawn dusk ebony emerald fern frost garnet glacier golden harbor indigo
ivory jade lagoon lilac maple meadow midnight mint north ocean olive opal orchid pearl pine plum quartz rose ruby
saffron sage sand scarlet shadow silver sky slate snow south spruce storm sunset teal thunder topaz umber velvet
violet willow winter
"""

# The standard modules that generated functions call, and so the missing imports of the NameError tasks.
STDLIB_MODULES = (
    "bisect calendar collections datetime fractions heapq itertools json math operator re statistics string"
)


# Training tasks make up one name word in MADE_UP_SHARE (a pronounceable non-word, split by the tokenizer into
# pieces no dictionary word gives): a model that recalled its training words would get a held-out name wrong (the
# first built-in model wrote `count_cork` for the held-out `limit_cork`); one that copies what it read gets both.
MADE_UP_SHARE = 3
_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "cr", "dr",
           "fl", "gr", "pl", "st", "tr")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "oo")
_CODAS = ("", "", "n", "r", "l", "s", "k", "m", "x")


def made_up_word(rng: random.Random) -> str:
    """Two or three syllables that are no word of this module's lists and name nothing Python has."""
    while True:
        syllables = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 3))))
        word = syllables + rng.choice(_CODAS)
        if word not in _LISTED and word not in _PYTHON_NAMES:
            return word


_LISTED = frozenset(" ".join((VERBS, NOUNS, QUALIFIERS, CONFIG_MODULES, VALUE_WORDS, STDLIB_MODULES)).split())
_PYTHON_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | frozenset(sys.stdlib_module_names)


def split_of(value: object) -> str:
    """The split `value` belongs to: a hash of its text picks one quarter for held-out tasks."""
    return "heldout" if zlib.crc32(str(value).encode()) % HELDOUT_SHARE == 0 else "train"


def pool(words: str, split: str) -> tuple[str, ...]:
    """The words of `words` (whitespace-separated) that belong to `split`, sorted."""
    return tuple(sorted(word for word in set(words.split()) if split_of(word) == split))


class Vocabulary:
    """The names and values one split may use, drawn with `rng` (each task has its own)."""

    def __init__(self, split: str, rng: random.Random) -> None:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
        self.split, self.rng = split, rng
        self.verbs = pool(VERBS, split)
        self.nouns = pool(NOUNS, split)
        self.qualifiers = pool(QUALIFIERS, split)
        self.config_modules = pool(CONFIG_MODULES, split)
        self.value_words = pool(VALUE_WORDS, split)
        self.stdlib = pool(STDLIB_MODULES, split)
        self.ints = tuple(v for v in range(2, 100) if split_of(v) == split)
        self.floats = tuple(v / 10 for v in range(1, 100) if v % 10 and split_of(v / 10) == split)
        self._used: set[str] = set()

    def fresh(self, make, attempts: int = 200) -> str:
        """A name from `make()` that this task has not used yet, and that is no part of one it used nor holds one
        (so that renaming by plain text replacement never touches another name)."""
        for _ in range(attempts):
            name = make()
            if all(name not in used and used not in name for used in self._used):
                self._used.add(name)
                return name
        raise RuntimeError("the word pools ran out of fresh names for one task: add words to training/tasks/words.py")

    def word(self, words: tuple[str, ...]) -> str:
        """One of `words`, or in a training task sometimes a made-up word (MADE_UP_SHARE)."""
        if self.split == "train" and self.rng.randrange(MADE_UP_SHARE) == 0:
            return made_up_word(self.rng)
        return self.rng.choice(words)

    def function_name(self) -> str:
        return self.fresh(lambda: f"{self.word(self.verbs)}_{self.word(self.nouns)}")

    def noun(self) -> str:
        return self.fresh(lambda: self.word(self.nouns))

    def constant_name(self) -> str:
        return self.fresh(lambda: f"{self.rng.choice(self.qualifiers)}_{self.word(self.nouns)}".upper())

    def config_module(self) -> str:
        return self.fresh(lambda: self.rng.choice(self.config_modules))

    def int_value(self, exclude: Sequence[int] = ()) -> int:
        return self.rng.choice([v for v in self.ints if v not in exclude])

    def small_int(self, limit: int = 40) -> int:
        return self.rng.choice([v for v in self.ints if v <= limit])

    def float_value(self, exclude: Sequence[float] = ()) -> float:
        return self.rng.choice([v for v in self.floats if v not in exclude])

    def word_value(self, exclude: Sequence[str] = ()) -> str:
        return self.rng.choice([v for v in self.value_words if v not in exclude])
