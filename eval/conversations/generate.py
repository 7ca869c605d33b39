"""Write eval/conversations/{memories,queries}.jsonl and meta.json: long chats, one turn per
memory, one store per conversation.

    PYTHONPATH=python python eval/conversations/generate.py

Each of the 10 conversations is between two friends over 22-26 dated sessions (about a
week apart). A session holds small talk and one or two episodes of the life threads the
friends follow (a bike bought, a dog adopted, a new job, a trip...). Episodes are written
the way people talk: the thing is named once, then it is "it", "she", "the blue one", and
the fact a question asks for is often in a turn that names nothing ("The green one, the
other was sold out."). Questions (≥ 15 per conversation) give the turn keys that hold
their evidence; kinds: single (one turn names it), coref (the evidence turn refers back),
multi (two turns, often in different sessions), temporal (when did ...: the evidence is
the turn of that session).
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 20261123
#: The clock searches run against (Options.now, once cortex has it): after the last note.
NOW = "2026-11-23T12:00:00+00:00"

# A thread: slot choices, then its episodes in order. An episode is a list of turns
# (speaker "A" = the person whose life it is, "B" = the friend) and questions
# (text, kind, evidence turn indices; ("prev", i) points into the previous episode).
THREADS: dict[str, dict[str, Any]] = {
    "bike": {
        "slots": {"brand": ["Canyon Grail", "Trek Checkpoint", "Cube Nuroad", "Specialized Diverge"],
                  "colour": ["green", "blue", "grey", "orange"],
                  "place": ["the lake", "the old monastery", "the coast", "the ridge trail"],
                  "km": ["62", "85", "48", "110"]},
        "episodes": [
            ([("A", "I'm thinking about getting a new bike, probably a {brand}."),
              ("B", "Nice! Road or gravel?"),
              ("A", "Gravel. I want to ride the forest trails on weekends.")],
             [("Which bike was {A} thinking of buying?", "single", [0]),
              ("What kind of riding did {A} want the new bike for?", "coref", [2])]),
            ([("A", "I bought it! The {brand} arrived on Tuesday."),
              ("B", "Finally! Which colour did you pick?"),
              ("A", "The {colour} one, the other one was sold out.")],
             [("What colour is {A}'s bike?", "coref", [2])]),
            ([("A", "Rode to {place} on Saturday, {km} km in total."),
              ("B", "On the new one? How did it handle?"),
              ("A", "Like a dream, but my legs hurt for two days.")],
             [("How far did {A} ride to {place}?", "single", [0]),
              ("How did {A}'s legs feel after the ride to {place}?", "coref", [2]),
              ("What brand of bike did {A} ride to {place}?", "multi", [("prev", 0), 0])]),
        ],
    },
    "dog": {
        "slots": {"name": ["Biscuit", "Pepper", "Juno", "Otis"],
                  "breed": ["beagle", "border collie", "greyhound", "spaniel mix"],
                  "vet": ["Dr. Amari", "Dr. Lindqvist", "Dr. Osei", "Dr. Moreau"]},
        "episodes": [
            ([("A", "We adopted a dog from the shelter! Her name is {name}."),
              ("B", "Oh wow, what breed is she?"),
              ("A", "A {breed}, about two years old.")],
             [("What is the name of the dog {A} adopted?", "single", [0]),
              ("What breed is {A}'s dog?", "coref", [2]),
              ("When did {A} adopt the dog?", "temporal", [0])]),
            ([("A", "{name} chewed through the sofa cushion yesterday."),
              ("B", "Ha, did you get her a crate?"),
              ("A", "Yes, and a bunch of chew toys. It helped a lot.")],
             [("What did {A}'s dog chew through?", "single", [0]),
              ("Did {A} get a crate for the dog?", "coref", [2])]),
            ([("A", "Took {name} to {vet} for her vaccinations."),
              ("B", "All good?"),
              ("A", "She's healthy, just needs to lose a kilo.")],
             [("Which vet did {A} take the dog to?", "single", [0]),
              ("What did the vet say about {A}'s dog?", "coref", [2])]),
        ],
    },
    "job": {
        "slots": {"company": ["Lumen Analytics", "Northwind Logistics", "Brightpath Health", "Quarry Labs"],
                  "role": ["staff engineer", "engineering manager", "data engineer", "product designer"],
                  "boss": ["Helen", "Marcus", "Ingrid", "Tobias"]},
        "episodes": [
            ([("A", "I have a final interview at {company} on Thursday."),
              ("B", "For which role?"),
              ("A", "{role}. It would be a big step.")],
             [("Where did {A} have a final interview?", "single", [0]),
              ("What role did {A} interview for?", "coref", [2])]),
            ([("A", "I got the offer and I accepted it!"),
              ("B", "Congratulations! When do you start?"),
              ("A", "The first Monday of next month.")],
             [("When does {A} start the new job?", "coref", [2]),
              ("Did {A} accept the offer from {company}?", "multi", [("prev", 0), 0])]),
            ([("A", "First week at {company} done. My manager {boss} is great."),
              ("B", "What's the team working on?"),
              ("A", "A rewrite of the billing platform, fun and scary.")],
             [("Who is {A}'s manager at the new job?", "single", [0]),
              ("What is {A}'s new team working on?", "coref", [2])]),
        ],
    },
    "trip": {
        "slots": {"city": ["Lisbon", "Kyoto", "Porto", "Edinburgh"],
                  "hotel": ["a small guesthouse near the castle", "a ryokan by the river",
                            "an apartment in the old town", "a hotel by the station"],
                  "food": ["grilled sardines", "ramen", "pastel de nata", "haggis"]},
        "episodes": [
            ([("A", "We're planning a trip to {city} in the spring."),
              ("B", "Lovely. Where will you stay?"),
              ("A", "In {hotel}, we booked it last night.")],
             [("Where is {A} travelling in the spring?", "single", [0]),
              ("Where will {A} stay on the trip?", "coref", [2])]),
            ([("A", "Back from {city}! It rained every single day."),
              ("B", "Oh no. Did you still have fun?"),
              ("A", "Yes, the food saved it. I ate {food} every day.")],
             [("What was the weather like during {A}'s trip?", "single", [0]),
              ("What food did {A} eat every day on the trip to {city}?", "coref", [2]),
              ("When did {A} come back from {city}?", "temporal", [0])]),
        ],
    },
    "guitar": {
        "slots": {"teacher": ["Rosa", "Felix", "Noor", "Declan"],
                  "song": ["Blackbird", "Wonderwall", "Hallelujah", "Dust in the Wind"]},
        "episodes": [
            ([("A", "I started guitar lessons with a teacher called {teacher}."),
              ("B", "Acoustic or electric?"),
              ("A", "Acoustic, a cheap one from a friend.")],
             [("Who teaches {A} guitar?", "single", [0]),
              ("What kind of guitar does {A} play?", "coref", [2])]),
            ([("A", "I can finally play {song} all the way through."),
              ("B", "That's a hard one! How long did it take?"),
              ("A", "About six weeks of practising every evening.")],
             [("Which song can {A} play all the way through?", "single", [0]),
              ("How long did it take {A} to learn {song}?", "coref", [2])]),
        ],
    },
    "kitchen": {
        "slots": {"colour": ["sage green", "navy", "terracotta", "off-white"],
                  "builder": ["Kowalczyk & Sons", "Greenline Builders", "Hart Renovations",
                              "Bauer Bau"]},
        "episodes": [
            ([("A", "We're finally renovating the kitchen."),
              ("B", "Who's doing the work?"),
              ("A", "{builder}, they start in three weeks.")],
             [("Which company is renovating {A}'s kitchen?", "coref", [2])]),
            ([("A", "We chose the cabinet colour today."),
              ("B", "Let me guess, white?"),
              ("A", "No, {colour}. My partner convinced me.")],
             [("What colour are the new kitchen cabinets?", "coref", [2]),
              ("Who convinced {A} about the cabinet colour?", "coref", [2])]),
            ([("A", "The kitchen is done, two weeks late but worth it."),
              ("B", "Was the builder good in the end?"),
              ("A", "Yes, except they broke one tile, which they replaced.")],
             [("How late was the kitchen renovation?", "single", [0]),
              ("What did the builder break in {A}'s kitchen?", "coref", [2]),
              ("Which builder broke a tile in {A}'s kitchen?", "multi", [("first", 2), 2])]),
        ],
    },
    "marathon": {
        "slots": {"race": ["the Berlin marathon", "the Valencia marathon", "the Chicago marathon",
                           "the Rotterdam marathon"],
                  "time": ["3:45", "4:10", "3:30", "3:58"]},
        "episodes": [
            ([("A", "I signed up for {race}."),
              ("B", "Wow. What's your goal?"),
              ("A", "Under {time}, if my knee holds up.")],
             [("Which race did {A} sign up for?", "single", [0]),
              ("What finishing time is {A} aiming for?", "coref", [2])]),
            ([("A", "My knee started hurting on the long run."),
              ("B", "Did you see someone about it?"),
              ("A", "A physio, she says it's my IT band. Stretching every day now.")],
             [("What did the physio say about {A}'s knee?", "coref", [2])]),
            ([("A", "I finished {race}!"),
              ("B", "Did you make your goal?"),
              ("A", "Missed it by four minutes, but I don't care, I finished.")],
             [("Did {A} reach the goal time in the race?", "coref", [2]),
              ("When did {A} run the marathon?", "temporal", [0])]),
        ],
    },
    "wedding": {
        "slots": {"sister": ["Clara", "Mina", "Sofia", "Hanna"],
                  "venue": ["a vineyard outside the city", "her partner's family farm",
                            "a lakeside hotel", "an old mill"]},
        "episodes": [
            ([("A", "My sister {sister} got engaged!"),
              ("B", "Oh how lovely! When's the wedding?"),
              ("A", "Next summer, at {venue}.")],
             [("Who got engaged?", "single", [0]),
              ("Where will {sister}'s wedding be?", "coref", [2])]),
            ([("A", "She asked me to give a speech at the wedding."),
              ("B", "Are you nervous?"),
              ("A", "Terrified. I've written three drafts already.")],
             [("What did {A}'s sister ask {A} to do at the wedding?", "single", [0]),
              ("How many drafts of the speech has {A} written?", "coref", [2])]),
        ],
    },
    "book": {
        "slots": {"book": ["The Overstory", "Piranesi", "Klara and the Sun", "The Remains of the Day"],
                  "club": ["Wednesday", "Sunday", "Thursday", "Friday"]},
        "episodes": [
            ([("A", "Our book club picked {book} for this month."),
              ("B", "Have you started it?"),
              ("A", "Halfway through, I can't put it down.")],
             [("Which book did {A}'s book club pick?", "single", [0]),
              ("How far into the book club book was {A}?", "coref", [2])]),
            ([("A", "Book club is moving to {club} evenings."),
              ("B", "Does that work for you?"),
              ("A", "Better than before, actually.")],
             [("Which evening does {A}'s book club meet now?", "single", [0])]),
        ],
    },
    "garden": {
        "slots": {"veg": ["tomatoes", "courgettes", "beans", "peppers"],
                  "pest": ["slugs", "aphids", "snails", "pigeons"]},
        "episodes": [
            ([("A", "I planted {veg} in the new raised beds."),
              ("B", "From seed?"),
              ("A", "Seedlings from the market, I'm impatient.")],
             [("What did {A} plant in the raised beds?", "single", [0]),
              ("Did {A} grow the plants from seed?", "coref", [2])]),
            ([("A", "Something is eating my plants."),
              ("B", "Do you know what?"),
              ("A", "{pest}. I'm trying copper tape.")],
             [("What pest is eating {A}'s plants?", "coref", [2]),
              ("Which plants were being eaten in {A}'s garden?", "multi", [("prev", 0), 2])]),
        ],
    },
    "car": {
        "slots": {"car": ["old Golf", "Corolla", "Fiesta", "Octavia"],
                  "cost": ["480", "650", "320", "900"]},
        "episodes": [
            ([("A", "My {car} made a grinding noise on the motorway."),
              ("B", "That sounds expensive. Brakes?"),
              ("A", "The mechanic thinks it's the wheel bearing.")],
             [("What noise did {A}'s car make?", "single", [0]),
              ("What did the mechanic think was wrong with the car?", "coref", [2])]),
            ([("A", "Got the car back today."),
              ("B", "How much did it cost?"),
              ("A", "{cost} euros, ouch.")],
             [("How much did {A}'s car repair cost?", "coref", [2])]),
        ],
    },
    "move": {
        "slots": {"area": ["Riverside", "the north end", "Old Harbour", "Hillcrest"],
                  "rooms": ["two-bedroom", "three-room", "one-bedroom", "two-bedroom"]},
        "episodes": [
            ([("A", "We found a flat in {area}!"),
              ("B", "How big is it?"),
              ("A", "{rooms}, with a small balcony.")],
             [("Which area is {A}'s new flat in?", "single", [0]),
              ("How big is {A}'s new flat?", "coref", [2])]),
            ([("A", "Moving day was chaos, the van came three hours late."),
              ("B", "Did everything survive?"),
              ("A", "Everything except my grandmother's vase.")],
             [("What broke during {A}'s move?", "coref", [2]),
              ("When did {A} move flats?", "temporal", [0])]),
        ],
    },
    "app": {
        "slots": {"app": ["a habit tracker", "a recipe planner", "a plant watering reminder",
                          "a running log"],
                  "stack": ["Flutter", "SwiftUI", "React Native", "Kotlin"]},
        "episodes": [
            ([("A", "I'm building {app} as a side project."),
              ("B", "What are you writing it in?"),
              ("A", "{stack}, I wanted to learn it anyway.")],
             [("What side project is {A} building?", "single", [0]),
              ("Which technology is {A} using for the side project?", "coref", [2])]),
            ([("A", "The app got its first hundred users."),
              ("B", "From where?"),
              ("A", "A post on a forum, totally by accident.")],
             [("How did {A}'s app get its first users?", "coref", [2])]),
        ],
    },
    "spanish": {
        "slots": {"tutor": ["Lucía", "Mateo", "Carmen", "Diego"],
                  "level": ["A2", "B1", "B2", "A2"]},
        "episodes": [
            ([("A", "I'm learning Spanish with a tutor, {tutor}."),
              ("B", "Online?"),
              ("A", "Yes, twice a week on video calls.")],
             [("Who is {A}'s Spanish tutor?", "single", [0]),
              ("How often does {A} have Spanish lessons?", "coref", [2])]),
            ([("A", "I passed the {level} exam!"),
              ("B", "Congrats! Was it hard?"),
              ("A", "The listening part was brutal.")],
             [("Which Spanish exam did {A} pass?", "single", [0]),
              ("Which part of the exam was hard for {A}?", "coref", [2])]),
        ],
    },
}  # fmt: skip

SMALL_TALK = [
    [("B", "Hey! How was your week?"), ("A", "Busy, but good. You?"),
     ("B", "Same, work is crazy right now.")],
    [("A", "Hi! Long time no talk."), ("B", "I know, sorry, it's been a lot.")],
    [("B", "Morning! Did you sleep at all?"), ("A", "Barely, the neighbours had a party.")],
    [("A", "Happy Friday!"), ("B", "Finally. Any plans for the weekend?"),
     ("A", "Nothing much, just resting.")],
    [("B", "It's so cold today."), ("A", "Tell me about it, I wore two jumpers.")],
    [("A", "Did you watch the match yesterday?"), ("B", "Only the second half, what a finish.")],
    [("B", "Quick one, are we still on for coffee next week?"), ("A", "Yes, Tuesday works.")],
    [("A", "I'm so tired today."), ("B", "Coffee?"), ("A", "Already on my third.")],
    [("B", "Did you see the news about the train strike?"),
     ("A", "Yes, I'm working from home all week because of it.")],
    [("A", "I finally fixed the leaking tap."), ("B", "Look at you! YouTube?"),
     ("A", "Of course, three videos and one new washer.")],
    [("B", "My mum called, she says hi."), ("A", "Say hi back! How is she?"),
     ("B", "Good, busy with her choir.")],
    [("A", "Have you tried the new bakery on the corner?"),
     ("B", "Yes! The cardamom buns are dangerous.")],
    [("B", "I'm thinking of cutting my hair short."), ("A", "Do it, it's only hair.")],
    [("A", "Our landlord is raising the rent again."), ("B", "Ugh, by how much?"),
     ("A", "Five percent. Still cheaper than moving.")],
    [("B", "What are you cooking tonight?"), ("A", "Leftover soup, living the dream.")],
    [("A", "I signed up for a pottery workshop, just one evening."),
     ("B", "Fun, send me pictures of whatever you make.")],
    [("B", "Work trip next week, Munich again."), ("A", "Bring back pretzels!")],
    [("A", "The heating broke this morning."), ("B", "Oh no, in this weather?"),
     ("A", "Someone comes tomorrow, I'm in a blanket.")],
    [("B", "Finished that series you recommended."), ("A", "And? The ending?"),
     ("B", "Loved it, even the ending.")],
    [("A", "My phone screen cracked."), ("B", "Again?"), ("A", "Again. New case ordered.")],
]  # fmt: skip
CLOSINGS = [[("B", "Talk soon!")], [("A", "Gotta run, bye!")], [("B", "Good luck with it!")],
            [("A", "Speak next week.")], []]  # fmt: skip

PAIRS = [("Maya", "Leo"), ("Jonas", "Amira"), ("Priya", "Tom"), ("Elena", "Kofi"),
         ("Sven", "Laura"), ("Aiko", "Ben"), ("Omar", "Grace"), ("Nina", "Pablo"),
         ("Ravi", "Zoe"), ("Freya", "Daniel")]  # fmt: skip


def conversation(rng: random.Random, index: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    a, b = PAIRS[index]
    store = f"conv-{index + 1:02d}"
    # A's threads are asked about. B tells stories of their own, never asked about: the
    # other kinds, and three of A's kinds with other details (both friends have a dog),
    # so that "What breed is Maya's dog?" has a same-topic distractor in Leo's turns.
    threads = rng.sample(sorted(THREADS), 9)
    b_threads = rng.sample(sorted(set(THREADS) - set(threads)), 4)
    b_threads += [t + "@B" for t in rng.sample(threads, 3)]
    slot_pick = {t: {k: rng.choice(v) for k, v in THREADS[t.split("@")[0]]["slots"].items()}
                 for t in threads + b_threads}  # fmt: skip
    owner = {**{t: "A" for t in threads}, **{t: "B" for t in b_threads}}
    # schedule: each thread's episodes in order, threads interleaved, spread evenly over
    # the sessions (some sessions are small talk only)
    sessions = 22 + index % 5
    everyone = threads + b_threads
    pending = {t: 0 for t in everyone}
    order: list[tuple[str, int]] = []
    def size(t: str) -> int:
        return len(THREADS[t.split("@")[0]]["episodes"])

    while any(pending[t] < size(t) for t in everyone):
        t = rng.choice([t for t in everyone if pending[t] < size(t)])
        order.append((t, pending[t]))
        pending[t] += 1
    slots_per_session: list[list[tuple[str, int]]] = [[] for _ in range(sessions)]
    for i, item in enumerate(order):
        slots_per_session[i * sessions // len(order)].append(item)
    start = date(2025, 9, 1) + timedelta(days=index * 9)
    day = start
    memories: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    turn_of: dict[tuple[str, int], list[str]] = {}  # (thread, episode) -> turn keys
    for si in range(sessions):
        day += timedelta(days=rng.randint(4, 10))
        sid = f"{store}-s{si + 1:02d}"
        minute = 0
        turns: list[tuple[str, str, tuple[str, int] | None]] = []
        for chat in rng.sample(SMALL_TALK, rng.choice([1, 2, 2, 3])):
            turns += [(spk, text, None) for spk, text in chat]
        for t, e in slots_per_session[si]:
            for spk, text in THREADS[t.split("@")[0]]["episodes"][e][0]:
                if owner[t] == "B":  # the friend tells their own story
                    spk = "B" if spk == "A" else "A"
                turns.append((spk, text.format(**slot_pick[t]), (t, e)))
        for spk, text in rng.choice(CLOSINGS):
            turns.append((spk, text, None))
        hour = rng.randint(8, 21)
        for ti, (spk, text, where) in enumerate(turns):
            key = f"{sid}-t{ti + 1:02d}"
            name = a if spk == "A" else b
            created = datetime(day.year, day.month, day.day, hour, 0) + timedelta(minutes=minute)
            minute += rng.randint(1, 4)
            memories.append({"key": key, "store": store, "content": f"{name}: {text}",
                             "session": sid,
                             "created_at": created.strftime("%Y-%m-%dT%H:%M:00+00:00")})  # fmt: skip
            if where is not None:
                turn_of.setdefault(where, []).append(key)
    session_day = {m["session"]: m["created_at"][:10] for m in memories}
    for t in threads:
        for e, (_turns, qs) in enumerate(THREADS[t]["episodes"]):
            for text, kind, evidence in qs:
                keys = []
                for ev in evidence:
                    if isinstance(ev, tuple):
                        which = e - 1 if ev[0] == "prev" else 0
                        keys.append(turn_of[(t, which)][ev[1]])
                    else:
                        keys.append(turn_of[(t, e)][ev])
                q = text.format(A=a, **slot_pick[t])
                if kind == "temporal":
                    sid = keys[0].rsplit("-t", 1)[0]
                    q += " (the answer is a date)"
                    answer = session_day[sid]
                else:
                    answer = None
                entry = {"id": f"{store}-q{len(questions) + 1:02d}", "store": store, "query": q,
                         "kind": kind, "options": {}, "relevant": {k: 2 for k in dict.fromkeys(keys)}}  # fmt: skip
                if answer:
                    entry["answer_date"] = answer
                questions.append(entry)
    for q in questions:  # the question text never leaks the placeholder
        assert "{" not in q["query"], q
    return memories, questions


def main(argv: list[str] | None = None) -> int:
    """Write the set; with --check, only say whether the files on disk are what this script
    writes (the test suite runs it so: the committed data always obey the rules above)."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    files: dict[str, str] = {}
    rng = random.Random(SEED)
    memories: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for i in range(len(PAIRS)):
        m, q = conversation(rng, i)
        memories += m
        queries += q
    for q in queries:
        q["query"] = q["query"].replace(" (the answer is a date)", "")
    files["memories.jsonl"] = (
        "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in memories)
    )
    files["queries.jsonl"] = (
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    )
    stores = sorted({m["store"] for m in memories})
    meta = {"name": "conversations", "stores": stores, "nested": False, "seed": SEED,
            "now": NOW}  # fmt: skip
    files["meta.json"] = json.dumps(meta, indent=2) + "\n"
    if check:
        stale = [n for n, text in files.items()
                 if not (HERE / n).exists() or (HERE / n).read_text(encoding="utf-8") != text]
        if stale:
            print(f"{HERE.name}: {stale} differ from what generate.py writes; run it")
        return 1 if stale else 0
    for name, text in files.items():
        (HERE / name).write_text(text, encoding="utf-8")
    per = Counter(q["store"] for q in queries)
    sessions = {s: len({m["session"] for m in memories if m["store"] == s}) for s in stores}
    print(f"{len(memories)} turns, {len(queries)} questions;", dict(Counter(q["kind"] for q in queries)))
    print("questions per conversation", dict(per))
    print("sessions per conversation", sessions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
