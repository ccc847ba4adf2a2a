"""``--prompts chat``: conversational questions in the style of MT-Bench (first turns only).

Forty questions in MT-Bench's eight categories, five each: writing, roleplay, reasoning, math,
coding, extraction, STEM and humanities. They are written for this project (MT-Bench's own
questions are not copied), so a figure can be reproduced from the revision alone. Each is a
plain-text turn ending in "Answer:", as a base model without a chat template sees it. For a
code model like the bundled target most of them are off-domain, which is the point: the
draft's acceptance on what users ask besides code.
"""

from __future__ import annotations

_QUESTIONS = {
    "writing": (
        "Write a short blog post about a weekend trip to a coastal town, with two places "
        "to eat and one thing to avoid.",
        "Draft a polite email to a landlord asking for a broken heater to be repaired "
        "before the weekend.",
        "Write a product description for a reusable water bottle that keeps drinks cold for a day.",
        "Compose a four-line poem about the first snow of winter in a city.",
        "Write the opening paragraph of a mystery story set in a train station at night.",
    ),
    "roleplay": (
        "Pretend you are a museum guide. Introduce the museum's oldest painting to a group "
        "of school children.",
        "You are a chef on a cooking show. Explain how to make a simple tomato soup.",
        "Act as a travel agent and recommend a three-day plan for a first visit to Rome.",
        "You are a coach before a big match. Give your team a short speech.",
        "Play a librarian helping a student find sources for a history essay about "
        "ancient trade routes.",
    ),
    "reasoning": (
        "If all bloops are razzies and some razzies are lazzies, must some bloops be "
        "lazzies? Explain.",
        "A farmer has 17 sheep. All but 9 run away. How many sheep are left, and why?",
        "Three friends split a bill of 60 dollars. One pays twice as much as each of the "
        "others. How much does each pay?",
        "You are in a race and pass the person in second place. What place are you in now?",
        "A clock shows 3:15. What is the angle between the hour and the minute hands?",
    ),
    "math": (
        "Solve for x: 3x + 7 = 25. Show each step.",
        "What is the sum of the first 20 positive odd numbers?",
        "A rectangle has a perimeter of 30 cm and a length of 9 cm. What is its area?",
        "Two dice are rolled. What is the probability that the sum is 8?",
        "Find the derivative of f(x) = x^3 - 4x^2 + 2x - 5.",
    ),
    "coding": (
        "Write a Python function that returns the longest common prefix of a list of strings.",
        "Explain the difference between a list and a tuple in Python, with an example of each.",
        "Write a SQL query that finds the five customers with the highest total order value.",
        "How would you reverse a singly linked list in place? Give the algorithm and its "
        "complexity.",
        "Write a JavaScript function that debounces another function by a given delay.",
    ),
    "extraction": (
        "From this sentence, list every date and what happened on it: The bridge opened on "
        "4 May 1932, closed for repairs on 12 June 1980 and reopened on 1 March 1982.",
        "Extract the names of all people and their job titles: Maria Lopez, the head "
        "engineer, met with Tom Reed, the city planner, and Ana Kim, a reporter.",
        "Pull out the product, price and quantity from this order line: 3 x Blue Desk Lamp "
        "at 24.99 each.",
        "Given the review 'The battery lasts two days but the screen scratches easily', "
        "list one strength and one weakness.",
        "Return the city and country for each address: 10 Rue Cler, Paris, France; 221B "
        "Baker Street, London, UK.",
    ),
    "stem": (
        "Explain why the sky is blue in terms a ten-year-old would understand.",
        "What is the difference between a virus and a bacterium?",
        "How does a refrigerator move heat from inside to outside?",
        "Describe what happens during photosynthesis, step by step.",
        "Why do objects of different mass fall at the same rate in a vacuum?",
    ),
    "humanities": (
        "Summarize the main causes of the French Revolution in a few sentences.",
        "What is the difference between utilitarianism and deontological ethics?",
        "Explain why the printing press changed European society.",
        "Compare the roles of a president and a prime minister in a government.",
        "What themes does a coming-of-age novel usually explore? Give two examples.",
    ),
}

#: The questions as prompts, category by category.
CHAT: tuple[str, ...] = tuple(
    f"Question: {q}\n\nAnswer:" for questions in _QUESTIONS.values() for q in questions
)
