"""The paper's prompt texts (Figs 33-39), as `str.format` templates. Constants only; `prompts.py` renders them.

Wording is the paper's, character for character. The paper's text is a PDF extraction that lost whitespace
(indentation, some spaces: "Output{NUM_INPUTS}Inputs", "'John',{{'age'"), so line breaks and indentation follow the
authors' code (data_construction/prompts.py), which renders
the same words. `tests/services/algorithm/test_prompts.py` compares every template with the paper's figure, whitespace
aside, so any drift in wording fails.

Placeholders carry the paper's own names ({CODE_REFERENCES_FROM_BUFFER}, {SNIPPET}, ...). `{{` and `}}` are
`str.format` escapes, exactly as printed in the paper: the rendered prompt shows single braces.
Templates carry no leading or trailing newline; `prompts.render_r1_prompt` adds the line breaks around them.
"""

from __future__ import annotations

R1_SYSTEM_INSTRUCTION = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with the answer. "
    "The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> tags, "
    "respectively, i.e., <think> reasoning process here </think> <answer> answer here </answer>."
)
"""Fig 33 (Deepseek R1 template): the instruction part, without the User/Assistant scaffolding."""

R1_TEMPLATE = R1_SYSTEM_INSTRUCTION + " User: \n{TASK_INSTRUCTION}\nAssistant: <think>"
"""Fig 33: the full R1 template for base models. Byte layout as the authors rendered it: their task prompts begin
with a newline, so the instruction starts on the line after "User: " (reference §3.1)."""

# The requirement lists shared by the two code-writing proposers (Figs 34, 35).
_PROPOSER_CODE_REQUIREMENTS = """### Code Requirements:
- Name the entry function `f` (e.g., `def f(...): ...`), you can have nested definitions inside `f`
- Ensure the function returns a value
- Include at least one input parameter
- Make the function deterministic
- Make the snippet require state tracking across multiple data transformations, ensuring the task requires long multi step reasoning
- AVOID THE FOLLOWING:
  * Random functions or variables
  * Date/time operations
  * I/O operations (reading files, network requests)
  * Printing or logging
  * Any external state
- Ensure execution completes within 10 seconds on a modern CPU
- All imports and class definitions should be at the very top of the code snippet
- The snippet should end with a return statement from the main function `f`, anything after will be removed

### Input Requirements:
- Provide exactly one test input for your function
- Format multiple arguments with commas between them
- Remember to add quotes around string arguments"""

_PROPOSER_EXAMPLE_FORMAT = """### Example Format:
```python
def f(name: str, info: dict):
    # code logic here
    return result
```

```input
'John', {{'age': 20, 'city': 'New York'}}
```"""

_PROPOSER_CLOSING = """- Creativity, the code needs to be sufficiently different from the provided reference snippets
- Restricted usage of certain keywords and packages, you are not allowed to use the following words in any form, even in comments: {LIST_OF_FORBIDDEN_PACKAGES}

First, carefully devise a clear plan: e.g., identify how your snippet will be challenging, distinct from reference snippets, and creative. Then, write the final code snippet and its inputs.

### Reference Code Snippets:
{CODE_REFERENCES_FROM_BUFFER}"""

ABDUCTION_PROPOSER_TEMPLATE = f"""## Task: Create a Python Code Snippet (where custom classes are allowed, which should be defined at the top of the code snippet) with one Matching Input

Using the reference code snippets provided below as examples, design a new and unique Python code snippet that demands deep algorithmic reasoning to deduce one possible input from a given output. Your submission should include both a code snippet and test input pair, where the input will be plugged into the code snippet to produce the output, which that function output be given to a test subject to come up with any input that will produce the same function output. This is meant to be an I.Q. test.

{_PROPOSER_CODE_REQUIREMENTS}

### Formatting:
- Format your code with: ```python
  def f(...):
      # your code here
      return ...
  ```
- Format your input with: ```input
  arg1, arg2, ...
  ```

{_PROPOSER_EXAMPLE_FORMAT}

### Evaluation Criteria:
- Executability, your code should be executable given your input
- Difficulty in predicting the output from your provided input and code snippet. Focus on either algorithmic reasoning or logic complexity. For example, you can define complex data structure classes and operate on them like trees, heaps, stacks, queues, graphs, etc, or use complex control flow, dynamic programming, recursions, divide and conquer, greedy, backtracking, etc
{_PROPOSER_CLOSING}"""
"""Fig 34: program input abduction task, problem proposal instruction.

The "Difficulty" bullet speaks of predicting the *output* although this is the abduction proposer; Figs 34 and 35 have
the two bullets swapped (the authors' code too). Kept as printed: we reproduce the paper, not a corrected prompt."""

DEDUCTION_PROPOSER_TEMPLATE = f"""## Task: Create a New Python Code Snippet (where custom classes are allowed, which should be defined at the top of the code snippet) with one Matching Input

Using the reference code snippets provided below as examples, design a new and unique Python code snippet that demands deep algorithmic reasoning to deduce the output from the input. Your submission should include a code snippet and a test input pair, where the input will be plugged into the code snippet to produce the output. The input will be given to a test subject to deduce the output, which is meant to be an I.Q. test.

{_PROPOSER_CODE_REQUIREMENTS}

### Formatting:
- Format your code with:
```python
def f(...):
    # your code here
    return ...
```
- Format your input with:
```input
arg1, arg2, ...
```

{_PROPOSER_EXAMPLE_FORMAT}

### Evaluation Criteria:
- Executability, your code should be executable given your input
- Difficulty in predicting your ```input``` from 1) your ```python``` code and 2) the deterministic ```output``` that will be obtained from your ```input```. Focus on either algorithmic reasoning or logic complexity. For example, you can define complex data structure classes and operate on them like trees, heaps, stacks, queues, graphs, etc, or use complex control flow, dynamic programming, recursions, divide and conquer, greedy, backtracking, etc
{_PROPOSER_CLOSING}"""
"""Fig 35: program output deduction task, problem generation instruction (Difficulty bullet swapped, see Fig 34)."""

INDUCTION_PROPOSER_TEMPLATE = """## Task: Output {NUM_INPUTS} Inputs that can be plugged into the following Code Snippet to produce diverse Outputs, and give a message related to the given snippet.

Using the code snippet provided below, design {NUM_INPUTS} inputs that can be plugged into the code snippet to produce a diverse set of outputs. A subset of your given input and its deterministically produced outputs will be given to a test subject to deduce the function, which is meant to be an I.Q. test. You can also leave a message to the test subject to help them deduce the code snippet.

### Input Requirements:
- Provide {NUM_INPUTS} valid inputs for the code snippet
- For each input, format multiple arguments with commas between them
- Remember to add quotes around string arguments
- Each input should be individually wrapped in ```input``` tags

### Message Requirements:
- Leave a message to the test subject to help them deduce the code snippet
- The message should be wrapped in ```message``` tags
- The message can be in any form, can even be formed into a coding question, or a natural language instruction what the code snippet does
- You cannot provide the code snippet in the message

### Formatting:
- Format your input with:
```input
arg1, arg2, ...
```

### Example Format:
```input
'John', {{'age': 20, 'city': 'New York'}}
```
```input
'Sammy', {{'age': 37, 'city': 'Los Angeles'}}
```

### Evaluation Criteria:
- Executability, your code should be executable given your inputs
- Coverage, the inputs and outputs should cover the whole input space of the code snippet, able to deduce the code snippet from the inputs and outputs
- Creativity, the inputs need to be sufficiently different from each other
- The overall selection of inputs and message combined should be challenging for the test subject, but not impossible for them to solve
First, carefully devise a clear plan: e.g., understand the code snippet, then identify how your proposed inputs have high coverage, and why the inputs will be challenging and creative. Then, write the inputs and message. Remember to wrap your inputs in ```input``` tags, and your message in ```message``` tags.

### Code Snippet:
```python
{SNIPPET_FROM_BUFFER}
```"""
"""Fig 36: program induction task, problem proposal instruction."""

ABDUCTION_SOLVER_TEMPLATE = """# Task: Provide One Possible Input of a Python Code Snippet Given the Code and Output
Given the following Code Snippet and the Output, think step by step then provide one possible input that produced the output. The input needs to be wrapped in ```input``` tags. Remember if an argument is a string, wrap it in quotes. If the function requires multiple arguments, separate them with commas.

# Code Snippet:
```python
{SNIPPET}
```

# Output:
```output
{OUTPUT}
```

# Output Format:
```input
arg1, arg2, ...
```
# Example Output:
```input
'John', {{'age': 20, 'city': 'New York'}}
```"""
"""Fig 37: program input abduction task, problem solving prompt."""

DEDUCTION_SOLVER_TEMPLATE = """# Task: Deduce the Output of a Python Code Snippet Given the Code and Input
Given the following Code Snippet and the Input, think step by step then deduce the output that will be produced from plugging the Input into the Code Snippet. Put your output in ```output``` tags. Remember if the output is a string, wrap it in quotes. If the function returns multiple values, remember to use a tuple to wrap them.

# Code Snippet:
```python
{SNIPPET}
```

# Input:
```input
{INPUT}
```

# Example Output:
```output
{{'age': 20, 'city': 'New York'}}
```"""
"""Fig 38: program output deduction task, problem solving prompt."""

INDUCTION_SOLVER_TEMPLATE = """# Task: Deduce the Function that Produced the Outputs from the Inputs
Given a set of input/output pairs and a message that describes the function, think through the problem step by step to deduce a general code snippet. This code should produce the hidden outputs from the hidden inputs, matching the original data-generating code that created the input/output pairs. Place your final answer inside python tags! It may be helpful to work through each input/output pair individually to test your function. If your function doesn\u2019t work as expected, revise it until it does. The final code snippet will be used to evaluate your response, which is wrapped in ```python``` tags.

# Code Requirements:
- Name the entry function `f` (e.g., `def f(...): ...`), you can have nested definitions inside `f`
- Ensure the function returns a value
- Include at least one input parameter
- Make the function deterministic
- AVOID THE FOLLOWING:
  * Random functions or variables
  * Date/time operations
  * I/O operations (reading files, network requests)
  * Printing or logging
  * Any external state
- Ensure execution completes within 10 seconds on a modern CPU
- All imports and class definitions should be at the very top of the code snippet
- The snippet should end with a return statement from the main function `f()`, anything after will be removed

# Input and Output Pairs:
{INPUT_OUTPUT_PAIRS}

# Message:
```message
{MESSAGE}
```

# Example Output:
```python
def f(a):
    return a
```

Name your entry function `f()`!!!"""
"""Fig 39: program induction task, problem solving prompt. "doesn\u2019t" keeps the paper's typographic apostrophe."""
