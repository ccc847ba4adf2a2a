"""Openings of general English prose for a real target's self-distillation.

The corpus this machine has (manual pages, ``/usr/share/doc``, Python sources) is technical
text: a draft trained on it alone predicts the target's code and documentation well and its
prose poorly (sampled depth-1 acceptance 0.26 on ``--prompts english`` against 0.35 on code).
EAGLE-3 trains on a chat model's answers to users' instructions; a base model's equivalent is
its continuation of the openings users write. These openings are built from forms crossed with
subjects, all written for this project: stories, explanations, advice, descriptions, essays,
letters, questions and sentence openings on everyday subjects. The target writes the text the
draft learns from (``draft_data.py generate``); the openings only steer it to prose.

None is a benchmark prompt (``tests/models/test_training.py`` checks against every set of
``etspec.tools.prompts``), and the subjects avoid the benchmark prompts' own subjects, so that
the English figures measure prose the draft was not shown.
"""

from __future__ import annotations

import random

# "Explain why / how ..." clauses.
_WHY = (
    "why ice floats on water",
    "how a rainbow forms",
    "why bread dough rises",
    "how birds find their way when they migrate",
    "why metal rusts and wood rots",
    "how the heart pumps blood around the body",
    "why soap removes grease",
    "how plants turn sunlight into food",
    "how a compass finds north",
    "why volcanoes erupt",
    "how glaciers carve valleys",
    "why coffee keeps people awake",
    "why thunder comes after lightning",
    "why stars seem to twinkle",
    "how muscles grow stronger with exercise",
    "how a lock and key work",
    "why some animals hibernate",
    "how a river changes its course over centuries",
    "why we yawn",
    "how a bicycle stays upright",
    "why onions make people cry",
    "how a microwave oven heats food",
    "why the desert gets cold at night",
    "how coral reefs are built",
    "why people get hiccups",
    "how a submarine dives and surfaces",
    "why cities are warmer than the countryside",
    "how fingerprints are used to identify people",
    "how elections are counted",
    "why some foods spoil faster than others",
    "how a camera captures a picture",
    "why babies sleep so much",
    "how a dam produces electricity",
    "why wool keeps sheep warm even when it is wet",
    "how interest on a loan works",
    "why mountains are colder at the top",
    "how sound travels through air",
    "why people remember some dreams and forget others",
    "how a post office sorts letters",
    "why salt melts ice on roads",
)

# Subjects of essays, histories and descriptions (noun phrases).
_SUBJECTS = (
    "the telephone",
    "the game of chess",
    "public libraries",
    "the Silk Road",
    "tea",
    "the Olympic Games",
    "paper money",
    "maps and map-making",
    "mechanical clocks",
    "glass-blowing",
    "jazz",
    "the umbrella",
    "canals",
    "the postal service",
    "windmills",
    "board games",
    "the violin",
    "chocolate",
    "sailing ships",
    "the pencil",
    "public parks",
    "bridges",
    "the zipper",
    "street food",
    "the circus",
    "photography",
    "the steam engine",
    "knitting",
    "the theatre",
    "museums",
    "coins",
    "the calendar",
    "marathons",
    "the piano",
    "spices",
    "castles",
    "newspapers",
    "the alphabet",
    "cheese-making",
    "kites",
)

# Who or what a story is about.
_STORIES = (
    "a baker who wakes up able to hear what bread is thinking",
    "two children who find a tunnel under their school",
    "an old clockmaker and his last apprentice",
    "a girl who trains a crow to deliver letters",
    "a town where it has not rained for a hundred years",
    "a retired astronaut who opens a bakery",
    "a ship's cook who becomes captain by accident",
    "a painter who can only paint at night",
    "a boy who loses his shadow",
    "a detective who is afraid of heights",
    "a family that moves into a house with one extra room nobody built",
    "a shepherd who counts one sheep too many",
    "a postman on his final round before retirement",
    "a tailor who sews a coat that makes its wearer invisible",
    "a tortoise who wants to win a race fairly this time",
    "a musician who forgets every song except one",
    "a gardener whose roses bloom in winter",
    "an inventor whose machine only works when nobody is watching",
    "a mountain village cut off by snow for a whole winter",
    "a taxi driver who picks up the same passenger every night",
    "a queen who trades her crown for a boat",
    "a young doctor's first night shift",
    "a lost suitcase that travels around the world",
    "a bookshop that only opens when it rains",
    "a clumsy knight and a patient horse",
    "a farmer who finds a map in a scarecrow",
    "a friendship between a whale and a seagull",
    "a chess champion who plays her last game against her grandson",
    "a city bus that decides to take a different route",
    "a thief who only steals umbrellas",
)

# What someone needs advice about (gerund phrases).
_ADVICE = (
    "learning to cook for the first time",
    "moving to a new city alone",
    "training for a first long-distance run",
    "speaking in front of a large audience",
    "starting a vegetable garden on a balcony",
    "getting along with a difficult neighbour",
    "saving for a first home",
    "learning to swim as an adult",
    "planning a long train journey",
    "choosing a second-hand car",
    "making friends after leaving school",
    "writing a first novel",
    "looking after an elderly parent",
    "keeping a small business afloat in a bad year",
    "raising chickens in a back yard",
    "preparing for a long hike",
    "teaching a teenager to drive",
    "organising a family reunion",
    "taking better photographs with a phone",
    "staying calm in a traffic jam",
    "adopting a rescue dog",
    "keeping a tidy home with little time",
    "returning to study after many years",
    "running a neighbourhood book club",
    "cooking for a large group on a budget",
)

# Places and moments to describe.
_SCENES = (
    "a harbour at dawn",
    "a crowded train at rush hour",
    "a desert under a full moon",
    "a school playground after the last bell",
    "a fairground at the end of the season",
    "an airport in the middle of the night",
    "a fishing village in a storm",
    "a street after the first snowfall",
    "a hospital corridor at night",
    "an orchard at harvest time",
    "a railway platform in the fog",
    "a football stadium just before kick-off",
    "a river bank on a hot afternoon",
    "an empty theatre before a performance",
    "a night market in a big city",
    "a farmhouse kitchen at breakfast",
    "a city square during a festival",
    "a quiet beach in winter",
    "an old bookshop full of dust and light",
    "a mountain hut during a blizzard",
    "a wedding party late in the evening",
    "a classroom on the first day of term",
    "a vineyard at sunset",
    "a ferry crossing on a windy day",
    "a garden after a summer storm",
)

# Questions for essays and opinions (whole clauses).
_DEBATES = (
    "whether cities should ban cars from their centres",
    "whether children should learn to cook at school",
    "whether it is better to rent or to buy a home",
    "whether homework helps children learn",
    "whether zoos do more good than harm",
    "whether everyone should learn a second language",
    "whether people should retire later",
    "whether tourism helps or harms small towns",
    "whether school uniforms are a good idea",
    "whether it is better to live in the city or the countryside",
    "whether museums should be free",
    "whether sport should be compulsory at school",
    "whether famous people owe the public an example",
    "whether handwriting still matters",
    "whether a four-day working week would work",
)

# Open sentence beginnings: the base model writes the rest.
_OPENINGS = (
    "It was the last day of the summer holidays, and",
    "Most people underestimate how",
    "The letter arrived three weeks late, but",
    "Nobody in the village had ever seen",
    "There are many good reasons to",
    "When I was a child, my father used to",
    "The first thing you notice when you arrive in the old town is",
    "Scientists have long wondered why",
    "After the storm had passed, the fishermen",
    "The hardest part of moving house is",
    "She opened the door slowly and",
    "In the years after the war, the small factory",
    "A good teacher is someone who",
    "The most important lesson I learned at my first job was",
    "Every spring, the river",
    "The road to the farm was long and",
    "Historians still argue about",
    "He had never been on a plane before, so",
    "The recipe had been in the family for generations:",
    "There is something special about",
    "At the edge of the forest stood",
    "One of the great pleasures of travelling by train is",
    "By the time the band started playing,",
    "The committee met on Tuesday to decide",
    "If you have ever tried to assemble furniture, you know",
    "Long before the age of computers,",
    "The first settlers in the valley",
    "It is often said that",
    "The news spread quickly through the town:",
    "Early in the morning, before anyone else was awake,",
)


def _forms() -> list[tuple[str, tuple[str, ...]]]:
    """(form, subjects) pairs: every form with the subjects it reads well with."""
    return [
        ("Explain {}.\n\n", _WHY),
        ("Explain {} to a child.\n\n", _WHY),
        ("Q: Can you explain {}?\nA:", _WHY),
        ("Question: Do you know {}?\nAnswer:", _WHY),
        ("Write a short history of {}.\n\n", _SUBJECTS),
        ("Write an essay about {}.\n\n", _SUBJECTS),
        ("The story of {} begins", _SUBJECTS),
        ("Describe {} to someone who has never seen it.\n\n", _SUBJECTS),
        ("Write a short story about {}.\n\n", _STORIES),
        ("Once upon a time there was {}.", _STORIES),
        ("Write the opening chapter of a novel about {}.\n\n", _STORIES),
        ("Give advice to someone who is {}.\n\n", _ADVICE),
        ("Here are some tips for {}:\n\n", _ADVICE),
        ("Write a friendly letter to a friend who is {}.\n\n", _ADVICE),
        ("Describe {}.\n\n", _SCENES),
        ("Write a paragraph describing {}.\n\n", _SCENES),
        ("Write a poem in prose about {}.\n\n", _SCENES),
        ("Write an essay on {}.\n\n", _DEBATES),
        ("Discuss {}, giving arguments on both sides.\n\n", _DEBATES),
        ("{}", _OPENINGS),
    ]


def prose_prompts(count: int, seed: int = 2) -> list[str]:
    """``count`` distinct openings in a fixed order (form by form in turn, subjects shuffled):
    any prefix spreads over every form. At most the number of (form, subject) pairs."""
    rng = random.Random(seed)
    queues = []
    for form, subjects in _forms():
        pool = [form.format(s) for s in subjects]
        rng.shuffle(pool)
        queues.append(pool)
    out: list[str] = []
    while len(out) < count and any(queues):
        for q in queues:
            if q and len(out) < count:
                out.append(q.pop())
    return out
