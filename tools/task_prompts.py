"""``--prompts tasks``: what chat users send, one set per task type.

Six sets of six prompts: translate a sentence, summarize a given article, answer a question,
solve a word problem, answer from a given passage, and MT-Bench-style questions (one of each
of six categories of ``chat_prompts``). These are the kinds of request a public speculative-
decoding benchmark (Spec-Bench) groups its prompts by; every text here is written for this
project (no benchmark's prompt is copied), so a figure reproduces from the revision alone.

They are evaluation prompts only. The shipped draft was trained on other text (this
machine's code and documentation, and the prose openings of ``etspec.training.prose_prompts``),
and ``tests/models/test_training.py`` checks that no training opening is, holds or is held by
one of these prompts.

Each prompt is plain text, as a base model without a chat template sees a request; the
answer cue at its end (``Summary:``, ``Answer:``) is where the target starts writing.
"""

from __future__ import annotations

from etspec.tools.chat_prompts import _QUESTIONS

_TRANSLATE = (
    ("French", "The museum is closed on Mondays, but the garden stays open until sunset."),
    ("Spanish", "Could you tell me where the nearest pharmacy is? My daughter has a fever."),
    ("German", "We missed the last train, so we walked home along the river in the rain."),
    ("Italian", "The recipe calls for three eggs, a cup of flour and a pinch of salt."),
    ("Portuguese", "Please send me the signed contract before the end of the week."),
    ("French", "My brother has lived in this village for twenty years and knows everyone."),
)

_ARTICLES = (
    "The town council voted on Tuesday to turn the old bus depot on Harbour Road into a "
    "covered market. The depot has stood empty since the bus company moved to a new site in "
    "2019. Under the plan, about forty stalls will sell food, crafts and second-hand goods "
    "four days a week, and the roof will carry solar panels that supply the building. "
    "Local traders welcomed the decision, but some residents worry about parking on the "
    "narrow streets nearby. The council says work will start in the spring and the market "
    "should open in time for the summer season.",
    "A small study of office workers found that short walks after lunch improved their "
    "afternoon concentration. Researchers asked sixty volunteers to either walk for ten "
    "minutes or sit quietly after eating, and then gave both groups the same attention "
    "tests. The walkers made fewer mistakes and reported feeling less tired. The authors "
    "note that the study was short, lasting only three weeks, and that larger trials are "
    "needed before firm advice can be given. Still, they say a brief walk costs little and "
    "is unlikely to do any harm.",
    "After three dry summers, farmers in the valley have started to plant crops that need "
    "less water. Many have replaced maize with sorghum and chickpeas, which cope better "
    "with heat. A cooperative of growers has also bought shared equipment for drip "
    "irrigation, which delivers water straight to the roots instead of spraying whole "
    "fields. Yields fell slightly in the first year of the change, but water use dropped "
    "by almost a third. The cooperative plans to hold open days so that other farmers can "
    "see the methods for themselves.",
    "The city library has launched a scheme that lets members borrow tools as well as "
    "books. Drills, ladders, sewing machines and garden equipment can now be reserved "
    "online and collected from two branches. The idea came from a survey in which many "
    "residents said they owned tools they used only once or twice a year. Staff check each "
    "item when it is returned, and volunteers run monthly sessions on basic repairs. In "
    "its first two months the scheme lent out more than nine hundred items.",
    "A ferry company has introduced an electric boat on its shortest crossing, a "
    "twenty-minute trip across the bay. The boat charges at each end while passengers get "
    "on and off, and it carries up to one hundred and fifty people and twenty bicycles. "
    "The company says the new vessel is quieter and cheaper to run than the diesel one it "
    "replaced, though it cost more to build. If the first year goes well, two more "
    "electric boats will be ordered for longer routes.",
    "Volunteers counted birds in the city's parks last weekend as part of a yearly survey. "
    "More than four hundred people took part, recording sightings for one hour in a place "
    "of their choice. Numbers of sparrows rose for the second year in a row, while "
    "starlings continued a long decline. Organisers believe new hedges planted along "
    "several streets may be helping smaller birds find food and shelter. The full results "
    "will be published next month and shared with the parks department.",
)

_QUESTIONS_QA = (
    "Why do we have leap years?",
    "What does a thermostat do in a house?",
    "How is cheese made from milk?",
    "What is the difference between a lake and a pond?",
    "Why do cats purr?",
    "How do noise-cancelling headphones work?",
)

_WORD_PROBLEMS = (
    "A school orders 14 boxes of pencils. Each box holds 12 pencils. The teachers hand out "
    "150 pencils in the first week. How many pencils are left?",
    "Maya saves 6 dollars every week. She already has 20 dollars. How many weeks will it "
    "take her to have 80 dollars?",
    "A train leaves at 9:40 and the journey takes 2 hours and 35 minutes. At what time "
    "does it arrive?",
    "A garden is 12 metres long and 7 metres wide. A path 1 metre wide runs all the way "
    "around the inside edge. What is the area of the garden that is not path?",
    "Tom buys 3 notebooks at 2.50 dollars each and a pen for 1.20 dollars. He pays with a "
    "10-dollar note. How much change does he get?",
    "A tank holds 240 litres. It is filled at 15 litres a minute and drained at 5 litres a "
    "minute at the same time. How long does it take to fill the empty tank?",
)

_PASSAGES = (
    (
        "The Lindqvist Bridge was built between 1908 and 1912 to link the two halves of the "
        "port. It is a steel swing bridge: its central section turns on a pivot so that "
        "tall ships can pass. Until 1965 the section was turned by hand by a team of four "
        "men; an electric motor has done the work since then. The bridge was closed for "
        "repairs in 1998 and reopened to cyclists and pedestrians only in 2001.",
        "Who turned the bridge before 1965, and who may cross it today?",
    ),
    (
        "The Orla Valley railway carried slate from the quarries at Brenn to the coast. It "
        "opened in 1871 with a track gauge of two feet and used horses until its first "
        "steam engine arrived in 1879. Passenger trains began in 1885 and ran until 1931. "
        "The line closed entirely in 1946, and a volunteer society reopened three miles of "
        "it as a heritage railway in 1974.",
        "What did the railway carry, and when did passenger services stop?",
    ),
    (
        "Greenfield Community Centre is open from 8 am to 9 pm on weekdays and from 9 am to "
        "5 pm on Saturdays; it is closed on Sundays. The pool is for lane swimming before "
        "10 am and for families after 4 pm. Members pay 12 dollars a month, and visitors "
        "pay 4 dollars a visit. Children under five swim free with an adult.",
        "Can a family swim at the centre at 5 pm on a Sunday? Explain.",
    ),
    (
        "The hedgehog in the garden study was tracked with a small radio tag for six weeks. "
        "It travelled up to two kilometres a night, visiting eleven gardens, and slept in "
        "the same pile of leaves on most days. Researchers found that it crossed roads "
        "mainly through gaps under fences and that it fed most often in gardens with "
        "ponds.",
        "How far did the hedgehog travel in a night, and where did it feed most often?",
    ),
    (
        "To renew a parking permit, residents must apply online at least ten days before "
        "the old permit expires. They need proof of address dated within the last three "
        "months and the car's registration document. A permit costs 60 dollars a year, or "
        "30 dollars for an electric car. Late applications are charged an extra 15 "
        "dollars.",
        "How much does a late renewal cost for an electric car?",
    ),
    (
        "The company's support team answers email within two working days. Phone lines are "
        "open from 9 am to 6 pm, Monday to Friday. Customers with a premium plan can also "
        "use a chat service that is staffed around the clock. Refund requests must be made "
        "within thirty days of purchase and are processed in five to seven working days.",
        "If a premium customer has a problem on Saturday night, how can they get help?",
    ),
)

# One question from each of six MT-Bench-style categories (math has a set of its own).
_CHAT_PICKS = (
    ("writing", 1),
    ("roleplay", 1),
    ("reasoning", 2),
    ("coding", 1),
    ("extraction", 0),
    ("humanities", 2),
)

#: The task-type sets, by name: what ``--prompts NAME`` (or ``tasks``, all of them) runs.
TASK_SETS: dict[str, tuple[str, ...]] = {
    "translate": tuple(
        f"Translate this sentence into {lang}.\n\nEnglish: {text}\n{lang}:"
        for lang, text in _TRANSLATE
    ),
    "summarize": tuple(
        f"Article: {a}\n\nSummarize the article in two sentences.\n\nSummary:" for a in _ARTICLES
    ),
    "qa": tuple(f"Question: {q}\n\nAnswer:" for q in _QUESTIONS_QA),
    "math": tuple(f"Question: {q}\n\nAnswer: Let's solve it step by step." for q in _WORD_PROBLEMS),
    "rag": tuple(
        f"Read the passage and answer the question.\n\nPassage: {p}\n\nQuestion: {q}\n\nAnswer:"
        for p, q in _PASSAGES
    ),
    "mtbench": tuple(f"Question: {_QUESTIONS[cat][i]}\n\nAnswer:" for cat, i in _CHAT_PICKS),
}
